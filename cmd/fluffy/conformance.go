package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// `fluffy conformance list|run`, and stub-kernel: internal, the throwaway
// kernel CORE-SHUTDOWN-002 kills (its arguments are its own).
func stubKernelFlags(e *env, _ *flag.FlagSet) func([]string) error {
	return func(args []string) error { return conformance.StubKernelMain(args, e.stdout) }
}

func conformanceListFlags(e *env, fs *flag.FlagSet) func([]string) error {
	asJSON := fs.Bool("json", false, "print the catalogue as JSON")
	asMD := fs.Bool("markdown", false, "print the whole catalogue as the Markdown tables of docs/conformance.md")
	profile := fs.String("profile", "", "`P` only this profile")
	return func([]string) error { return conformanceList(e, asJSON, asMD, profile) }
}

func conformanceList(e *env, asJSON, asMD *bool, profile *string) error {
	if *asMD {
		if *profile != "" || *asJSON {
			return usageErr("conformance list", "--markdown prints the whole catalogue", "usage: fluffy conformance list --markdown")
		}
		_, err := fmt.Fprint(e.stdout, conformance.CatalogueMarkdown())
		return err
	}
	var items []conformance.Item
	for _, it := range conformance.Catalogue() {
		if *profile == "" || it.Profile == *profile {
			items = append(items, it)
		}
	}
	if *asJSON {
		return writeJSON(e.stdout, items)
	}
	fmt.Fprintf(e.stdout, "fluffy conformance suite %s\n", conformance.SuiteVersion)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLEVEL\tPROFILE\tAPI\tSTATEMENT\tSOURCE")
	for _, it := range items {
		api := "all"
		if len(it.APIVersions) > 0 {
			api = ints(it.APIVersions)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.ID, it.Level, it.Profile, api, it.Statement, it.Source)
	}
	return tw.Flush()
}

// conformanceFailed makes `conformance run` exit 1 when a MUST failed.
type conformanceFailed struct{ err *uerr.Error }

func (c conformanceFailed) Error() string { return c.err.Error() }
func (c conformanceFailed) Unwrap() error { return c.err }
func (conformanceFailed) ExitCode() int   { return 1 }

func conformanceRunFlags(e *env, fs *flag.FlagSet) func([]string) error {
	profiles := fs.String("profile", "", "`P,Q` the profiles to run (default: core + the plugin's kind)")
	jsonOut := fs.String("json", "", "`FILE` also write the report as JSON")
	junitOut := fs.String("junit", "", "`FILE` also write the report as JUnit XML")
	sb := fs.String("sandbox", envOr(e.getenv, "FLUFFY_SANDBOX", "docker"), "`docker|none` docker: every item in the plugin's L2 container ($FLUFFY_SANDBOX sets the default);\nnone: a plain process with your privileges (development only)")
	startTimeout := fs.Duration("start-timeout", 10*time.Second, "`D` how long the plugin may take to become ready")
	pluginConfig := fs.String("config", "", "`JSON` Configure settings for a provider under test (the suite's base_url and api_key win;\nit also sends its probes' answers as cassette unless JSON has cassette or builtin_cassette),\ne.g. '{\"model\":\"m\"}'")
	return func(pos []string) error {
		return conformanceRun(e, pos, profiles, jsonOut, junitOut, sb, startTimeout, pluginConfig)
	}
}

func conformanceRun(e *env, pos []string, profiles, jsonOut, junitOut, sb *string, startTimeout *time.Duration, pluginConfig *string) error {
	if *pluginConfig != "" && !json.Valid([]byte(*pluginConfig)) {
		return usageErr("conformance run", "--config is not JSON", "pass a JSON object, e.g. --config '{\"builtin_cassette\":\"conformance\"}'")
	}
	var ps []string
	if *profiles != "" {
		ps = strings.Split(*profiles, ",")
	}
	ctx := context.Background()
	rep, err := certifyRun(ctx, e, pos[0], ps, *sb, *startTimeout, json.RawMessage(*pluginConfig), func(id string) {
		if e.isTTY {
			fmt.Fprintf(e.stderr, "  %s...\n", id)
		}
	})
	if err != nil {
		return err
	}
	if err := rep.WriteText(e.stdout); err != nil {
		return err
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{{*jsonOut, rep.WriteJSON}, {*junitOut, rep.WriteJUnit}} {
		if out.path == "" {
			continue
		}
		if err := writeFileAtomic(out.path, out.write); err != nil {
			return uerr.Wrap(err, "CONFORMANCE_REPORT_WRITE", "cannot write the report to "+out.path, err.Error(), "check the directory exists and is writable")
		}
	}
	recordCertification(e, rep)
	if failed := rep.FailedMUST(); len(failed) > 0 {
		return conformanceFailed{uerr.New("CONFORMANCE_FAILED", fmt.Sprintf("%s failed conformance", rep.Plugin),
			"MUST items failed: "+strings.Join(failed, ", "),
			"fix what each FAIL line above says, rebuild, restamp the manifest's sha256 and run again")}
	}
	if skipped := rep.SkippedMUST(); len(skipped) > 0 {
		return conformanceFailed{uerr.New("CONFORMANCE_NOT_CERTIFIED", fmt.Sprintf("%s is not certified", rep.Plugin),
			"MUST items were not checked: "+strings.Join(skipped, ", "),
			"see each SKIP line above for why; run with the L2 sandbox (--sandbox=docker, Docker and the runtime-docker adapter from `make build`)")}
	}
	return nil
}

// recordCertification stores a run's verdict on the installed plugin with
// the same name, version and binary hash, if there is one.
func recordCertification(e *env, rep *conformance.Report) {
	if rep.Plugin == "" {
		return
	}
	if _, err := os.Stat(e.home); err != nil {
		return
	}
	reg, closeFn, err := openRegistry(e)
	if err != nil {
		e.log.Debug("registry not available; certification not recorded", "error", err)
		return
	}
	defer closeFn()
	rec, err := reg.Get(rep.Plugin)
	if err != nil || rec.Version != rep.Version || rec.SHA256 != rep.SHA256 {
		return
	}
	if err := reg.SetCertification(context.Background(), rep.Plugin, rep.Version, conformance.Certification(rep)); err != nil {
		fmt.Fprintf(e.stderr, "warning: could not record the certification: %v\n", err)
		return
	}
	fmt.Fprintf(e.stdout, "certification recorded for installed %s@%s\n", rep.Plugin, rep.Version)
}

func writeFileAtomic(path string, write func(io.Writer) error) error {
	return atomicfile.WriteFunc(path, 0o600, write)
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i+1]
	}
	return "."
}

var _ = json.Marshal
