package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// pluginCall runs one tool of an installed plugin directly: the way to try
// a plugin by hand. Writes still only land in the output directory.
func pluginCallFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := fs.String("project", ".", "`DIR` the project the plugin sees read-only (must exist)")
	timeout := fs.Duration("timeout", 2*time.Minute, "`D` the deadline for the call")
	sb := fs.String("sandbox", envOr(e.getenv, "FLUFFY_SANDBOX", "docker"), "`docker|bwrap|none` the L2 runtime ($FLUFFY_SANDBOX sets the default; none: development only)")
	return func(pos []string) error { return pluginCall(e, project, timeout, sb, pos) }
}

func pluginCall(e *env, project *string, timeout *time.Duration, sb *string, pos []string) error {
	argsJSON := "{}"
	if len(pos) == 3 {
		argsJSON = pos[2]
	}
	if !json.Valid([]byte(argsJSON)) {
		return usageErr("plugin call", "ARGS_JSON is not valid JSON", `quote the arguments, e.g. '{"path":"a.go"}'`)
	}
	ws, err := filepath.Abs(*project)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	k, err := kernelapi.OpenLocal(ctx, kernelapi.LocalOptions{
		Home: e.home, Project: ws, Logger: e.log, Sandbox: *sb, Getenv: e.getenv,
		BuiltinDirs: builtinPluginDirs(e),
		Progress:    func(s string) { fmt.Fprintf(e.stderr, "  %s...\n", s) },
	})
	if err != nil {
		return err
	}
	defer k.Close()
	fmt.Fprintf(e.stderr, "  starting %s...\n", pos[0])
	start := time.Now()
	var review kernelapi.Reviewer
	if e.isTTY {
		review = ttyApprover{e: e}.Review
	}
	// The one judged path of every tool call: schema, policy per path,
	// review, the kernel's output limit, redaction and audit.
	res := k.CallTool(ctx, pos[0], pos[1], json.RawMessage(argsJSON), review, func(p tool.Progress) {
		fmt.Fprintf(e.stderr, "  %s says: %s (%.0f%%)\n", pos[0], textsafe.Line(p.Message, 200), 100*p.Fraction)
	})
	if res.APIVersion > 0 {
		fmt.Fprintf(e.stderr, "  %s %s via API v%d (%s)\n", pos[0], pos[1], res.APIVersion, time.Since(start).Round(time.Millisecond))
	}
	if res.Redactions > 0 {
		fmt.Fprintf(e.stderr, "  %d secret(s) redacted from the output\n", res.Redactions)
	}
	if res.Err != nil {
		return res.Err
	}
	out := map[string]any{"ok": res.OK, "output": json.RawMessage(nonEmpty(res.Output)), "changes": res.Changes, "cancelled": res.Cancelled}
	if len(res.Changes) > 0 {
		fmt.Fprintf(e.stderr, "  proposed changes are in %s (not applied)\n", res.OutDir)
	}
	return writeJSON(e.stdout, out)
}

// ttyApprover asks on the terminal when the policy wants a call reviewed.
type ttyApprover struct{ e *env }

func (a ttyApprover) Review(_ context.Context, r kernelapi.ToolReview) (bool, error) {
	w := a.e.stderr
	fmt.Fprintf(w, "REVIEW: %s %s wants to run with %s\n", r.Plugin, r.Tool, textsafe.Line(string(r.Args), 400))
	for _, it := range r.Items {
		target := it.Syscall
		if it.Path != "" {
			target += " " + it.Path
		}
		fmt.Fprintf(w, "  %s: %s\n", textsafe.Line(target, 400), textsafe.Line(strings.Join(it.Reasons, "; "), 400))
	}
	fmt.Fprint(w, "Allow this call once? [y/N] ")
	line, err := bufio.NewReader(a.e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return false, fmt.Errorf("no answer to the review prompt: %w", err)
	}
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes", nil
}

func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}
