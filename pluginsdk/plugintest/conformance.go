package plugintest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance/spec"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
)

// Conformance runs fluffy's conformance suite — the same one `fluffy plugin
// install` runs — on the plugin built from the Go main package pkg with the
// manifest at manifest (stamped with the fresh build's sha256; it may still
// be unstamped, sha256: ""), and fails t for every failed MUST item,
// printing the full report. profiles default to core plus the plugin's kind.
//
// The sandbox-fitness items (CORE-SANDBOX-001/002) run the plugin in its
// L2 container, which needs Docker and the runtime-docker adapter
// (FLUFFY_RUNTIME_ADAPTER, e.g. bin/plugins/runtime-docker/runtime-docker
// after `make build` in fluffy's checkout; never PATH or the plugin store).
// When either is missing the test fails and says how to fix it: without
// those items the plugin is not certified. An author who wants the rest of
// the suite anyway calls ConformanceWithoutSandbox instead.
//
// The suite's runner is kernel code, so it is not linked into the test:
// Conformance builds conformance/cmd/suiterun with the go command in
// fluffy's module directory and runs it, then reads back its JSON report
// (package conformance/spec).
//
//	func TestConformance(t *testing.T) {
//		plugintest.Conformance(t, ".", "plugin.yaml")
//	}
func Conformance(t testing.TB, pkg, manifest string, profiles ...string) *spec.Report {
	t.Helper()
	return conformanceBuilt(t, pkg, manifest, false, profiles)
}

// ConformanceWithoutSandbox is Conformance for a machine without Docker,
// chosen explicitly: the sandbox-fitness items are skipped (the report says
// NOT CERTIFIED), every other MUST item must pass. With
// FLUFFY_REQUIRE_DOCKER=1 (CI) it behaves like Conformance.
func ConformanceWithoutSandbox(t testing.TB, pkg, manifest string, profiles ...string) *spec.Report {
	t.Helper()
	return conformanceBuilt(t, pkg, manifest, os.Getenv(spec.EnvRequireDocker) != "1", profiles)
}

func conformanceBuilt(t testing.TB, pkg, manifest string, noSandbox bool, profiles []string) *spec.Report {
	t.Helper()
	return conformanceDir(t, stage(t, Build(t, pkg), manifest), noSandbox, profiles)
}

// stage lays out a plugin directory for the suite: the manifest, stamped
// with bin's sha256, beside bin at the manifest's entry. The manifest need
// not be stamped yet (sha256: "", as `fluffy plugin new` writes it): the
// fresh build is what gets certified, so its own hash is stamped.
func stage(t testing.TB, bin, manifest string) string {
	t.Helper()
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	parsed := data
	if placeholder, err := manifests.StampSHA256(data, strings.Repeat("0", 64)); err == nil {
		parsed = placeholder
	}
	m, err := manifests.Parse(manifest, parsed)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "plugin")
	entry := filepath.Join(dir, filepath.FromSlash(m.Entry))
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(entry, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := manifests.FileSHA256(entry)
	if err != nil {
		t.Fatal(err)
	}
	if data, err = manifests.StampSHA256(data, sum); err != nil {
		t.Fatalf("conformance: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, manifests.FileName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ConformanceDir runs the suite on an already laid-out plugin directory
// (plugin.yaml with the right sha256 beside its binary), with the L2
// sandbox like Conformance.
func ConformanceDir(t testing.TB, dir string, profiles ...string) *spec.Report {
	t.Helper()
	return conformanceDir(t, dir, false, profiles)
}

// sandboxFix is what to do when the L2 sandbox is missing.
const sandboxFix = "fix: start Docker and build fluffy's runtime adapter (`make build` in fluffy's checkout, then set FLUFFY_RUNTIME_ADAPTER=<checkout>/bin/plugins/runtime-docker/runtime-docker); or call plugintest.ConformanceWithoutSandbox to run the other items (the plugin is then not certified)"

// fluffyModule holds the runner: the kernel side of the suite, built and
// run rather than linked, so what an author's test binary links stays free
// of the kernel.
const (
	fluffyModule = "github.com/fluffy-waffle/fluffy"
	runnerDir    = "conformance/cmd/suiterun"
)

// buildRunner builds the runner inside fluffy's own module directory (the
// checkout go.mod's replace points at, or the module cache), with fluffy's
// go.sum: the author's go.sum lists only what the author's code links, not
// the kernel's dependencies.
// from is the directory whose module resolves fluffy ("" = the test's).
func buildRunner(t testing.TB, from string) string {
	t.Helper()
	list := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", fluffyModule)
	list.Dir = from
	var stderr bytes.Buffer
	list.Stderr = &stderr
	dir, err := list.Output()
	if err != nil || strings.TrimSpace(string(dir)) == "" {
		t.Fatalf("conformance: cannot find the %s module to build its suite runner: %v\n%s\nfix: require %s in go.mod (see fluffy's README, \"Depending on the SDK\")", fluffyModule, err, strings.TrimSpace(stderr.String()), fluffyModule)
	}
	bin, err := testbin.Path("./"+runnerDir, testbin.In(strings.TrimSpace(string(dir))), testbin.Flags("-buildvcs=false"), testbin.Env("GOWORK=off"))
	if err != nil {
		t.Fatalf("conformance: build the suite runner: %v", err)
	}
	return bin
}

// runnerNoSandbox is the runner's exit status for "the L2 sandbox is
// unavailable" (see conformance/cmd/suiterun).
const runnerNoSandbox = 3

func conformanceDir(t testing.TB, dir string, noSandbox bool, profiles []string) *spec.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "report.json")
	args := []string{"-json", out}
	if noSandbox {
		args = append(args, "-no-sandbox", "plugintest.ConformanceWithoutSandbox")
	}
	args = append(append(args, dir), profiles...)
	cmd := exec.CommandContext(ctx, buildRunner(t, ""), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == runnerNoSandbox:
		t.Fatalf("conformance: %s\nwithout it CORE-SANDBOX-001/002 cannot run and the plugin cannot be certified\n%s", strings.TrimSpace(stderr.String()), sandboxFix)
	case err != nil:
		t.Fatalf("conformance: %v\n%s", err, strings.TrimSpace(stderr.String()))
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("conformance: the runner wrote no report: %v\n%s", err, strings.TrimSpace(stderr.String()))
	}
	rep := &spec.Report{}
	if err := json.Unmarshal(data, rep); err != nil {
		t.Fatalf("conformance: the runner's report is not JSON: %v", err)
	}
	var b bytes.Buffer
	_ = rep.WriteText(&b)
	unmet := rep.FailedMUST()
	for _, id := range rep.SkippedMUST() {
		if !noSandbox || !strings.HasPrefix(id, "CORE-SANDBOX-") {
			unmet = append(unmet, id)
		}
	}
	if len(unmet) > 0 {
		t.Errorf("the plugin fails fluffy's conformance suite (MUST items not met: %s):\n%s", strings.Join(unmet, ", "), b.String())
	} else {
		t.Logf("%s", b.String())
	}
	return rep
}
