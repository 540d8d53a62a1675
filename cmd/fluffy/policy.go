package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fluffy-waffle/fluffy/host/policyverbs"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/lib/units"
)

// `fluffy policy show|validate|explain|update|trust`.

// projectPolicyPath is <project>/.fluffy/policy.yaml.
func projectPolicyPath(project string) string { return policyverbs.ProjectPath(project) }

// activePolicy loads the project's policy file when its content is the one
// approved in $FLUFFY_HOME, else the embedded default (policy/pin, and
// p.Unapproved says why).
func activePolicy(e *env, project string) (*policyverbs.Policy, error) {
	return policyverbs.New(e.home, e.log).Active(project)
}

func projectFlag(fs *flag.FlagSet) *string {
	return fs.String("project", ".", "`DIR` the project directory (its active policy is <project>/.fluffy/policy.yaml once\ntrusted with `fluffy policy trust`, else the built-in default)")
}

func printWarnings(w io.Writer, p *policyverbs.Policy) {
	for _, wn := range p.Warnings {
		fmt.Fprintf(w, "WARN: %s\n", wn)
	}
}

func policyShowFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectFlag(fs)
	return func([]string) error { return policyShow(e, project) }
}

func policyShow(e *env, project *string) error {
	p, err := activePolicy(e, *project)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Policy: %s\nMode: %s\nHash: %s\n", p.File, p.Mode, p.Hash)
	if p.Unapproved != nil {
		fmt.Fprintf(e.stdout, "Not in force: %s\n", textsafe.Line(p.Unapproved.Notice(), 500))
	}
	fmt.Fprintln(e.stdout)
	fmt.Fprintln(e.stdout, "Built-in rules (always first, cannot be changed):")
	for _, b := range policyverbs.Builtins() {
		fmt.Fprintf(e.stdout, "  %-30s %s\n", b.Name, b.Description)
	}
	fmt.Fprintf(e.stdout, "\nRules (%d; deny first, then by name):\n", len(p.Rules))
	for _, r := range p.Rules {
		fmt.Fprintf(e.stdout, "  %-36s %-15s %s\n", r.Name, r.Action, r.Source())
		if r.Reason != "" {
			fmt.Fprintf(e.stdout, "  %-36s reason: %s\n", "", r.Reason)
		}
	}
	if len(p.Extensions) > 0 {
		fmt.Fprintf(e.stdout, "\nExtensions (policy plugins consulted after the rules): %s\n", strings.Join(p.Extensions, ", "))
	}
	if p.Network.Set {
		hosts := "none"
		if len(p.Network.Hosts) > 0 {
			hosts = strings.Join(p.Network.Hosts, ", ")
		}
		fmt.Fprintf(e.stdout, "\nNetwork whitelist (plugins reach only these, and only if their manifest declares them): %s\n", hosts)
	}
	printWarnings(e.stdout, p)
	return nil
}

func policyValidateFlags(e *env, fs *flag.FlagSet) func([]string) error {
	return func([]string) error { return policyValidate(e, fs) }
}

func policyValidate(e *env, fs *flag.FlagSet) error {
	if fs.NArg() != 1 {
		return usageErr("policy validate", "expected exactly one FILE", "run `fluffy policy validate path/to/policy.yaml`")
	}
	p, err := policyverbs.LoadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	printWarnings(e.stdout, p)
	fmt.Fprintf(e.stdout, "OK: %s: %d rules, mode %s, %d warnings\n", fs.Arg(0), len(p.Rules), p.Mode, len(p.Warnings))
	return nil
}

func policyExplainFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectFlag(fs)
	var req policyverbs.Request
	var tags, hosts strList
	var size string
	all := fs.Bool("all", false, "also list rules that were evaluated but did not match")
	fs.StringVar(&req.Syscall, "syscall", "", "`S` the syscall type, e.g. fs.write")
	fs.StringVar(&req.Path, "path", "", "`P` a project-relative path (trailing / = directory); says whether it is a test or a source file")
	fs.StringVar(&req.Host, "host", "", "`H` the network host")
	fs.StringVar(&size, "size", "", "`N` the size, e.g. 2KiB")
	fs.StringVar(&req.Sandbox, "sandbox", "", "`T` the L2 sandbox template the operation runs in")
	fs.StringVar(&req.Caller.Plugin, "caller", "", "`NAME` the calling plugin (empty: the user)")
	fs.StringVar(&req.Caller.PluginKind, "plugin-kind", "", "`K` the calling plugin's kind")
	fs.Var(&tags, "tag", "`T` a caller capability tag")
	fs.Var(&hosts, "declared-host", "`H` a host the caller's manifest declares")
	fs.StringVar(&req.SessionMode, "mode", "", "`M` the session mode: strict, explore, debug")
	fs.StringVar(&req.State, "state", "", "`S` the workflow state")
	return func([]string) error { return policyExplain(e, project, &req, tags, hosts, size, all) }
}

func policyExplain(e *env, project *string, r *policyverbs.Request, tags, hosts strList, size string, all *bool) error {
	req := *r
	if req.Syscall == "" {
		return usageErr("policy explain", "--syscall is required", "e.g. `fluffy policy explain --syscall fs.write --path src/a.go`")
	}
	if size != "" {
		n, err := units.ParseSize(size)
		if err != nil {
			return usageErr("policy explain", err.Error(), "write "+units.SizeHelp)
		}
		req.Size = n
	}
	req.Caller.Tags, req.Caller.Hosts = tags, hosts
	req.Caller.Kind = "user"
	if req.Caller.Plugin != "" {
		req.Caller.Kind = "plugin"
	}
	x, err := policyverbs.New(e.home, e.log).Explain(context.Background(), *project, req)
	if err != nil {
		return err
	}
	p, res := x.Policy, x.Result
	w := e.stdout
	fmt.Fprintf(w, "Request: %s\nPolicy:  %s (mode %s)\n", req, p.File, p.Mode)
	if req.Path != "" {
		fmt.Fprintf(w, "Path:    %s is a %s file (path_class)\n", textsafe.Line(req.Path, 200), x.PathClass)
	}
	fmt.Fprintf(w, "Tests:   %s\n", textsafe.Line(p.Tests.Describe(), 500))
	if p.Unapproved != nil {
		fmt.Fprintf(w, "         %s\n", textsafe.Line(p.Unapproved.Notice(), 500))
	}
	fmt.Fprint(w, "\nRules:\n")
	shown := 0
	for _, ev := range res.Trace {
		if !ev.Matched && !*all && ev.Note == "" {
			continue
		}
		shown++
		verdict := ev.Action.String()
		if !ev.Matched {
			verdict = "no match"
			if ev.Note != "" {
				verdict = "pass (" + ev.Note + ")"
			}
		}
		src := ev.Source
		if src == "" {
			src = "-"
		}
		fmt.Fprintf(w, "  [%-9s] %-34s %-16s %s\n", ev.Layer, ev.Rule, verdict, src)
		if ev.Matched && ev.Reason != "" {
			fmt.Fprintf(w, "  %11s %s\n", "", ev.Reason)
		}
	}
	if shown == 0 {
		fmt.Fprintln(w, "  (no rule matched)")
	}
	fmt.Fprintf(w, "\nDecision: %s", strings.ToUpper(res.Decision.String()))
	if res.WouldDeny {
		fmt.Fprintf(w, " (observe mode: would deny, enforced as %s)", res.Enforced)
	}
	fmt.Fprintln(w)
	for _, d := range res.Deciding {
		fmt.Fprintf(w, "  decided by [%s] %s\n", d.Layer, d.Rule)
	}
	for _, r := range res.Reasons {
		fmt.Fprintf(w, "  reason: %s\n", r)
	}
	return nil
}

func policyUpdateFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectFlag(fs)
	yes := fs.Bool("yes", false, "approve the update without an interactive review (you reviewed the diff)")
	confirm := fs.String("confirm", "", "`PHRASE` the confirmation phrase, needed when more than 5 changes are breaking")
	return func([]string) error { return policyUpdate(e, fs, project, yes, confirm) }
}

func policyUpdate(e *env, fs *flag.FlagSet, project *string, yes *bool, confirm *string) error {
	if fs.NArg() != 1 {
		return usageErr("policy update", "expected exactly one FILE", "run `fluffy policy update path/to/new-policy.yaml`")
	}
	file := fs.Arg(0)
	content, err := os.ReadFile(file)
	if err != nil {
		return uerr.Wrap(err, policyverbs.CodeRead, "cannot read "+file, err.Error(), "check the path")
	}
	upd, err := policyverbs.New(e.home, e.log).PrepareUpdate(context.Background(), *project, file, content, func(what string) {
		fmt.Fprintf(e.stderr, "NOTE: audit log unavailable (%v); trial uses the policy's own examples\n", what)
	})
	if err != nil {
		return err
	}
	defer upd.Close()
	prop, gate := upd.Proposal, upd.Gate
	w := e.stdout
	printWarnings(w, prop.Policy)
	fmt.Fprintf(w, "Trial run: replayed %d recorded decisions against %s; %d change, %d breaking.\n", prop.Replayed, file, len(prop.Changes), prop.Breaking)
	for _, c := range prop.Changes {
		fmt.Fprintf(w, "  %s\n", c)
	}
	fmt.Fprintf(w, "Review required: %s\n", strings.Join(gate.Reasons, "; "))
	phrase := prop.ConfirmPhrase()
	approved := *yes
	if !approved {
		if !e.isTTY {
			return uerr.New("POLICY_REVIEW_REQUIRED", "policy update not applied",
				"policy changes always need human review, and there is no terminal to ask on",
				"review the trial run above, then re-run with --yes (and --confirm \"PHRASE\" if asked)")
		}
		ans, err := ask(e, "Apply this policy? [y/N] ")
		if err != nil {
			return err
		}
		approved = ans == "y" || ans == "yes"
	}
	if !approved {
		return uerr.New("POLICY_UPDATE_REJECTED", "policy update not applied", "the review did not approve it", "")
	}
	if phrase != "" && *confirm == "" && e.isTTY {
		if *confirm, err = ask(e, fmt.Sprintf("%d breaking changes. Type %q to apply: ", prop.Breaking, phrase)); err != nil {
			return err
		}
	}
	target, err := upd.Apply(context.Background(), *confirm)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Policy updated: %s (a running kernel reloads it automatically)\n", target)
	return nil
}

func ask(e *env, prompt string) (string, error) {
	fmt.Fprint(e.stdout, prompt)
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", uerr.Wrap(err, "POLICY_REVIEW_REQUIRED", "no answer to the review prompt", err.Error(), "answer the prompt, or use --yes")
	}
	return strings.TrimSpace(line), nil
}
