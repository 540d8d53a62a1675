package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/registry"
)

func runPlugin(e *env, args []string) error {
	return subcommands(e, "plugin", args, map[string]func(*env, []string) error{
		"install": pluginInstall,
		"list":    pluginList,
		"info":    pluginInfo,
		"remove":  pluginRemove,
		"enable":  pluginEnable,
		"disable": pluginDisable,
		"call":    pluginCall,
	})
}

// openRegistry opens the registry database under $FLUFFY_HOME, with its
// changes recorded in the home audit log.
func openRegistry(e *env) (*registry.Registry, func(), error) {
	ctx := context.Background()
	db, err := kernel.OpenHomeDB(ctx, e.home, e.log)
	if err != nil {
		return nil, nil, fmt.Errorf("open plugin registry: %w", err)
	}
	log, err := audit.Open(ctx, audit.Options{DB: db, Logger: e.log})
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	reg := registry.New(db.Badger(), registry.Options{Home: e.home, Logger: e.log, Auditor: kernel.Auditor{Log: log, Logger: e.log}})
	return reg, func() { _ = log.Close(); _ = db.Close() }, nil
}

// builtinPluginDirs are where fluffy's own plugins live: ./plugins beside
// the binary (what `make build` produces), or $FLUFFY_BUILTIN_PLUGINS.
func builtinPluginDirs(e *env) []string {
	if d := e.getenv("FLUFFY_BUILTIN_PLUGINS"); d != "" {
		return filepath.SplitList(d)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return []string{filepath.Join(filepath.Dir(exe), "plugins")}
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseInterspersed parses flags that may appear after positional args.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func pluginInstall(e *env, args []string) error {
	fs := newFlags("plugin install")
	yes := fs.Bool("yes", false, "approve a third-party plugin without asking")
	force := fs.Bool("force", false, "allow downgrade, reinstall, or a failed certification")
	asJSON := fs.Bool("json", false, "print the installed record as JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 1 {
		return usageErr("plugin install", "expected exactly one plugin path", "usage: fluffy plugin install ./path [--yes] [--force] [--json]")
	}
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		return err
	}
	defer closeFn()
	opts := registry.InstallOptions{
		Force: *force, Yes: *yes, BuiltinDirs: builtinPluginDirs(e),
		Progress: func(s string) { fmt.Fprintf(e.stderr, "  %s...\n", s) },
	}
	if e.isTTY {
		opts.Confirm = func(rec registry.Record, notes []string) (bool, error) {
			return confirmInstall(e, rec, notes)
		}
	}
	opts.Certifier = newCertifier(e)
	rec, err := reg.Install(context.Background(), pos[0], opts)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, rec)
	}
	fmt.Fprintf(e.stdout, "installed %s@%s (%s) into %s\n", rec.Name, rec.Version, rec.Kind, rec.Dir)
	return nil
}

func confirmInstall(e *env, rec registry.Record, notes []string) (bool, error) {
	fmt.Fprintf(e.stderr, "\nPlugin %s@%s (%s) by %s\n  %s\n", rec.Name, rec.Version, rec.Kind, rec.Author, rec.Description)
	fmt.Fprintf(e.stderr, "  tags: %s\n  capabilities: %s\n  sandbox: %s\n", strings.Join(rec.Tags, ", "), strings.Join(rec.Capabilities, ", "), rec.Template)
	if len(rec.Tools) > 0 {
		fmt.Fprintf(e.stderr, "  tools: %s\n", strings.Join(rec.Tools, ", "))
	}
	for _, n := range notes {
		fmt.Fprintf(e.stderr, "  NOTE: %s\n", n)
	}
	fmt.Fprint(e.stderr, "Install this plugin? [y/N] ")
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && line == "" {
		return false, nil
	}
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes", nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func pluginList(e *env, args []string) error {
	fs := newFlags("plugin list")
	rejected := fs.Bool("rejected", false, "list rejected manifests and why")
	asJSON := fs.Bool("json", false, "machine-readable output (stable)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return usageErr("plugin list", "unexpected arguments", "usage: fluffy plugin list [--rejected] [--json]")
	}
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		return err
	}
	defer closeFn()
	recs, err := reg.List(registry.Filter{Rejected: *rejected})
	if err != nil {
		return err
	}
	if *asJSON {
		if recs == nil {
			recs = []registry.Record{}
		}
		return writeJSON(e.stdout, recs)
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	if *rejected {
		fmt.Fprintln(tw, "NAME\tVERSION\tCODE\tMANIFEST\tREASON")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", dash(r.Name), dash(r.Version), dash(r.ErrorCode), r.ManifestPath, oneLine(r.Reason, 120))
		}
	} else {
		fmt.Fprintln(tw, "NAME\tVERSION\tKIND\tSTATE\tAPI\tTAGS\tCERTIFIED")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Version, r.Kind, r.State, ints(r.APIVersions), strings.Join(r.Tags, ","), certShort(r.Certification))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(recs) == 0 {
		if *rejected {
			fmt.Fprintln(e.stdout, "(no rejected plugins)")
		} else {
			fmt.Fprintln(e.stdout, "(no plugins installed; try `fluffy plugin install PATH`)")
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func ints(vs []int) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

func certShort(c *registry.Certification) string {
	switch {
	case c == nil:
		return "-"
	case c.Passed:
		return "yes (suite " + c.SuiteVersion + ")"
	case c.Forced:
		return "FORCED"
	}
	return "no"
}

func pluginInfo(e *env, args []string) error {
	fs := newFlags("plugin info")
	asJSON := fs.Bool("json", false, "machine-readable output")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 1 {
		return usageErr("plugin info", "expected one plugin name", "usage: fluffy plugin info NAME [--json]")
	}
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		return err
	}
	defer closeFn()
	vs, err := reg.Versions(pos[0])
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		_, err := reg.Get(pos[0])
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, vs)
	}
	r := vs[len(vs)-1]
	w := e.stdout
	fmt.Fprintf(w, "Name:          %s\nVersion:       %s\nKind:          %s\nState:         %s\n", r.Name, r.Version, r.Kind, r.State)
	if r.Reason != "" {
		fmt.Fprintf(w, "Reason:        %s\n", r.Reason)
	}
	fmt.Fprintf(w, "Description:   %s\nAuthor:        %s\nAPI versions:  %s\nTags:          %s\n", r.Description, r.Author, ints(r.APIVersions), strings.Join(r.Tags, ", "))
	fmt.Fprintf(w, "Capabilities:  %s\nSandbox:       %s\nSHA256:        %s\nDirectory:     %s\nInstalled:     %s\n",
		strings.Join(r.Capabilities, ", "), dash(r.Template), r.SHA256, r.Dir, r.InstalledAt.Format("2006-01-02 15:04:05"))
	if len(r.Tools) > 0 {
		fmt.Fprintf(w, "Tools:         %s\n", strings.Join(r.Tools, ", "))
	}
	if c := r.Certification; c != nil {
		verdict := "PASSED"
		if !c.Passed {
			verdict = "FAILED"
			if c.Forced {
				verdict += " (installed with --force)"
			}
		}
		fmt.Fprintf(w, "Certification: %s — suite %s, profiles %s, %s\n", verdict, c.SuiteVersion, strings.Join(c.Profiles, "+"), c.At.Format("2006-01-02 15:04"))
		if len(c.Failed) > 0 {
			fmt.Fprintf(w, "  failed MUST items: %s\n", strings.Join(c.Failed, ", "))
		}
		if c.Summary != "" {
			fmt.Fprintf(w, "  %s\n", c.Summary)
		}
	} else {
		fmt.Fprintln(w, "Certification: none")
	}
	if len(vs) > 1 {
		others := make([]string, 0, len(vs)-1)
		for _, v := range vs[:len(vs)-1] {
			others = append(others, v.Version)
		}
		fmt.Fprintf(w, "Other versions: %s\n", strings.Join(others, ", "))
	}
	return nil
}

func pluginRemove(e *env, args []string) error {
	if len(args) != 1 {
		return usageErr("plugin remove", "expected NAME or NAME@VERSION", "usage: fluffy plugin remove NAME[@VERSION]")
	}
	name, version, _ := strings.Cut(args[0], "@")
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		return err
	}
	defer closeFn()
	removed, err := reg.Remove(context.Background(), name, version)
	if err != nil {
		return err
	}
	for _, r := range removed {
		fmt.Fprintf(e.stdout, "removed %s@%s\n", r.Name, r.Version)
	}
	return nil
}

func pluginEnable(e *env, args []string) error {
	if len(args) != 1 {
		return usageErr("plugin enable", "expected one plugin name", "usage: fluffy plugin enable NAME")
	}
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := reg.Enable(context.Background(), args[0]); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "enabled %s\n", args[0])
	return nil
}

func pluginDisable(e *env, args []string) error {
	fs := newFlags("plugin disable")
	reason := fs.String("reason", "", "why it is disabled (required; shown in list and info)")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 1 || strings.TrimSpace(*reason) == "" {
		return usageErr("plugin disable", "expected one plugin name and --reason", `usage: fluffy plugin disable NAME --reason "why"`)
	}
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := reg.Disable(context.Background(), pos[0], *reason); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "disabled %s: %s\n", pos[0], *reason)
	return nil
}
