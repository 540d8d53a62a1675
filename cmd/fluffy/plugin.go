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
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// openRegistry opens the registry under $FLUFFY_HOME, with its changes
// recorded in the home audit log. The home database is opened per
// operation, so this works while kernels run.
func openRegistry(e *env) (*registry.Registry, func(), error) {
	ctx := context.Background()
	home, err := kernelapi.OpenRegistry(e.home, e.log, "fluffy plugin")
	if err != nil {
		return nil, nil, fmt.Errorf("open plugin registry: %w", err)
	}
	reg := home.Registry
	// fluffy's builtins are known whether or not a kernel ran before
	// (list shows them, info/disable/grant find them): register them the
	// way a kernel does at start.
	dirs := builtinPluginDirs(e)
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if _, err := reg.Scan(ctx, d, dirs); err != nil {
			e.log.Warn("discovering builtin plugins failed", "dir", d, "error", err)
		}
	}
	return reg, func() { _ = home.Close() }, nil
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

// stringList is a repeatable flag; each value may hold a comma list.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*l = append(*l, x)
		}
	}
	return nil
}
func (*stringList) repeatable() {}

// sandboxFlag declares --sandbox, where certification runs a plugin.
func sandboxFlag(e *env, fs *flag.FlagSet) *string {
	return fs.String("sandbox", envOr(e.getenv, "FLUFFY_SANDBOX", "docker"), "`docker|none` where certification runs the plugin after you approved it: docker, its L2\ncontainer ($FLUFFY_SANDBOX sets the default); none, a plain process with your privileges: your\nfiles, environment and network (development only)")
}

func pluginInstallFlags(e *env, fs *flag.FlagSet) func([]string) error {
	yes := fs.Bool("yes", false, "approve a third-party plugin without asking (grants no tag)")
	force := fs.Bool("force", false, "allow a downgrade, a reinstall, or a failed certification")
	asJSON := fs.Bool("json", false, "print the installed record as JSON")
	sb := sandboxFlag(e, fs)
	var grant stringList
	fs.Var(&grant, "grant", "`TAG` grant a tag the plugin requests, e.g. trusted_write (a comma list, or repeated)")
	return func(pos []string) error { return pluginInstall(e, pos, yes, force, asJSON, sb, grant) }
}

func pluginInstall(e *env, pos []string, yes, force, asJSON *bool, sb *string, grant stringList) error {
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		return err
	}
	defer closeFn()
	opts := registry.InstallOptions{
		Force: *force, Yes: *yes, Grant: grant, BuiltinDirs: builtinPluginDirs(e),
		Progress: func(s string) { fmt.Fprintf(e.stderr, "  %s...\n", s) },
	}
	if e.isTTY {
		in := bufio.NewReader(e.stdin)
		opts.Confirm = func(c registry.Consent) (registry.Approval, error) {
			return confirmInstall(e, in, c, pos[0])
		}
	}
	opts.Certifier = newCertifier(e, *sb)
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

// tagMeaning explains the tags the default policy gives meaning to.
func tagMeaning(tag string) string {
	switch tag {
	case registry.TagTrustedWrite:
		return "its writes are not sent to review (switches off the third-party-no-writes rule)"
	case registry.TagCore:
		return "treated as part of fluffy itself"
	}
	return "policy rules that match caller_tag: " + tag + " apply to it"
}

// confirmInstall shows exactly what the user approves and asks: first the
// plugin, then each tag it requests. A closed input is no answer, not "no".
func confirmInstall(e *env, in *bufio.Reader, c registry.Consent, src string) (registry.Approval, error) {
	rec := c.Record
	w := e.stderr
	fmt.Fprintf(w, "\nPlugin %s@%s (%s) by %s\n  %s\n", rec.Name, rec.Version, rec.Kind, textsafe.Line(dash(rec.Author), 200), textsafe.Line(rec.Description, 1000))
	fmt.Fprintf(w, "  from:           %s\n  sha256:         %s\n", rec.Source, rec.SHA256)
	fmt.Fprintf(w, "  requested tags: %s\n  capabilities:   %s\n", dash(strings.Join(rec.RequestedTags, ", ")), dash(strings.Join(rec.Capabilities, ", ")))
	sb := dash(rec.Template)
	if l := c.Limits; l.MemoryBytes > 0 || l.Timeout > 0 {
		sb += fmt.Sprintf(" (memory %d MiB, cpu %g, pids %d, timeout %s)", l.MemoryBytes>>20, l.CPUs, l.Pids, l.Timeout)
	}
	fmt.Fprintf(w, "  sandbox:        %s\n  network hosts:  %s\n", sb, dash(strings.Join(c.Network, ", ")))
	fmt.Fprintf(w, "  tools:          %s\n", dash(strings.Join(rec.Tools, ", ")))
	for _, n := range c.Notes {
		fmt.Fprintf(w, "  NOTE: %s\n", n)
	}
	ask := func(q string) (bool, error) {
		fmt.Fprint(w, q+" [y/N] ")
		line, err := in.ReadString('\n')
		if err != nil && strings.TrimSpace(line) == "" {
			return false, uerr.New(registry.CodeNotConfirmed, fmt.Sprintf("%s needs your approval, and no answer was given", rec.Name),
				"the input ended before an answer was read; nothing of the plugin was run or installed",
				fmt.Sprintf("answer y at the prompt, or review the plugin and run `fluffy plugin install %s --yes` (add --grant TAG for each tag you grant)", src))
		}
		a := strings.ToLower(strings.TrimSpace(line))
		return a == "y" || a == "yes", nil
	}
	ok, err := ask("Install this plugin? Nothing of it runs before you answer; certification then runs it in its sandbox.")
	if err != nil || !ok {
		return registry.Approval{Approved: ok}, err
	}
	ap := registry.Approval{Approved: true}
	for _, t := range c.Grantable {
		g, err := ask(fmt.Sprintf("It requests the tag %s: %s. Grant it?", t, tagMeaning(t)))
		if err != nil {
			return registry.Approval{}, err
		}
		if g {
			ap.Grant = append(ap.Grant, t)
		}
	}
	return ap, nil
}

func pluginGrantFlags(e *env, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error { return changeGrant(e, "grant", args) }
}

func pluginRevokeFlags(e *env, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error { return changeGrant(e, "revoke", args) }
}

func changeGrant(e *env, verb string, args []string) error {
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		return err
	}
	defer closeFn()
	if verb == "grant" {
		err = reg.Grant(context.Background(), args[0], args[1])
	} else {
		err = reg.Revoke(context.Background(), args[0], args[1])
	}
	if err != nil {
		return err
	}
	rec, err := reg.Get(args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s %s on %s; its tags are now: %s\n", map[string]string{"grant": "granted", "revoke": "revoked"}[verb], args[1], args[0], strings.Join(rec.Tags, ", "))
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(jsonOut{w})
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func pluginListFlags(e *env, fs *flag.FlagSet) func([]string) error {
	rejected := fs.Bool("rejected", false, "list rejected manifests and why instead")
	asJSON := fs.Bool("json", false, "machine-readable output (stable)")
	return func([]string) error { return pluginList(e, rejected, asJSON) }
}

func pluginList(e *env, rejected, asJSON *bool) error {
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", dash(r.Name), dash(r.Version), dash(r.ErrorCode), textsafe.Line(r.ManifestPath, 200), textsafe.Line(oneLine(r.Reason, 120), 240))
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

// certLine is one recorded certification in a line.
func certLine(c registry.Certification, sha string) string {
	v := "PASSED"
	if !c.Passed {
		v = "NOT PASSED (" + strings.Join(append(slices.Clone(c.Failed), c.Skipped...), ", ") + ")"
	}
	if !strings.EqualFold(c.SHA256, sha) {
		v += " for sha256 " + c.SHA256 + ", not the stored binary"
	}
	return fmt.Sprintf("%s — suite %s, profiles %s, %s", v, c.SuiteVersion, strings.Join(c.Profiles, "+"), c.At.Format("2006-01-02 15:04"))
}

func certShort(c *registry.Certification) string {
	switch {
	case c == nil:
		return "-"
	case c.Passed:
		return "yes (suite " + c.SuiteVersion + ", " + strings.Join(c.Profiles, "+") + ")"
	case c.Forced:
		return "FORCED"
	}
	return "no"
}

func pluginInfoFlags(e *env, fs *flag.FlagSet) func([]string) error {
	asJSON := fs.Bool("json", false, "every installed version as JSON")
	return func(pos []string) error { return pluginInfo(e, asJSON, pos) }
}

func pluginInfo(e *env, asJSON *bool, pos []string) error {
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
		fmt.Fprintf(w, "Reason:        %s\n", textsafe.Line(r.Reason, 1000))
	}
	fmt.Fprintf(w, "Description:   %s\nAuthor:        %s\nAPI versions:  %s\nTags:          %s\n", textsafe.Line(r.Description, 1000), textsafe.Line(r.Author, 200), ints(r.APIVersions), strings.Join(r.Tags, ", "))
	if len(r.RequestedTags) > 0 || len(r.GrantedTags) > 0 {
		fmt.Fprintf(w, "  requested:   %s\n  granted:     %s\n", dash(strings.Join(r.RequestedTags, ", ")), dash(strings.Join(r.GrantedTags, ", ")))
	}
	fmt.Fprintf(w, "Capabilities:  %s\nSandbox:       %s\nSHA256:        %s\nDirectory:     %s\nInstalled:     %s\n",
		strings.Join(r.Capabilities, ", "), dash(r.Template), r.SHA256, r.Dir, r.InstalledAt.Format("2006-01-02 15:04:05"))
	if len(r.Tools) > 0 {
		fmt.Fprintf(w, "Tools:         %s\n", strings.Join(r.Tools, ", "))
	}
	integrity := reg.Integrity(r)
	if integrity == nil {
		fmt.Fprintln(w, "Integrity:     ok (stored binary and manifest match the recorded sha256)")
	} else {
		ue := uerr.From(integrity)
		fmt.Fprintf(w, "Integrity:     MISMATCH — %s: %s\n  fix: %s\n", ue.What, ue.Why, ue.Fix)
	}
	if c := r.Certification; c != nil {
		verdict := "PASSED"
		if !c.Passed {
			verdict = "FAILED"
			if len(c.Failed) == 0 {
				verdict = "NOT CERTIFIED"
			}
			if c.Forced {
				verdict += " (installed with --force)"
			}
		}
		if integrity != nil || !strings.EqualFold(c.SHA256, r.SHA256) {
			verdict += " for sha256 " + c.SHA256 + ", not for what is stored now"
		}
		fmt.Fprintf(w, "Certification: %s — suite %s, profiles %s, %s\n", verdict, c.SuiteVersion, strings.Join(c.Profiles, "+"), c.At.Format("2006-01-02 15:04"))
		if len(c.Failed) > 0 {
			fmt.Fprintf(w, "  failed MUST items: %s\n", strings.Join(c.Failed, ", "))
		}
		if len(c.Skipped) > 0 {
			fmt.Fprintf(w, "  MUST items not checked: %s\n", strings.Join(c.Skipped, ", "))
		}
		if c.Summary != "" {
			fmt.Fprintf(w, "  %s\n", textsafe.Line(c.Summary, 1000))
		}
		for _, o := range r.Certifications {
			if o.SuiteVersion == c.SuiteVersion && o.SHA256 == c.SHA256 && strings.Join(o.Profiles, "+") == strings.Join(c.Profiles, "+") {
				continue
			}
			fmt.Fprintf(w, "  also: %s\n", certLine(o, r.SHA256))
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

func pluginRemoveFlags(e *env, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error { return pluginRemove(e, args) }
}

func pluginRemove(e *env, args []string) error {
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

func pluginEnableFlags(e *env, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error { return pluginEnable(e, args) }
}

func pluginEnable(e *env, args []string) error {
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

func pluginDisableFlags(e *env, fs *flag.FlagSet) func([]string) error {
	reason := fs.String("reason", "", "`WHY` it is disabled (shown in list and info and to whoever calls it)")
	return func(pos []string) error { return pluginDisable(e, reason, pos) }
}

func pluginDisable(e *env, reason *string, pos []string) error {
	if strings.TrimSpace(*reason) == "" {
		return usageErr("plugin disable", "--reason is empty", `say why: fluffy plugin disable NAME --reason "why"`)
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

// jsonOut is where the CLI's JSON goes: each document (json.Encoder
// writes one per Write) passes through textsafe.JSON, so plugin, model and
// audit strings reach the terminal without C1 controls or bidi overrides,
// as JSON escapes with the same meaning.
type jsonOut struct{ w io.Writer }

func (j jsonOut) Write(p []byte) (int, error) {
	if _, err := j.w.Write(textsafe.JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
