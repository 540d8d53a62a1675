package plugintest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/manifests"
)

// Conformance runs fluffy's conformance suite — the same one `fluffy plugin
// install` runs — on the plugin built from the Go main package pkg with the
// manifest at manifest (its sha256 is stamped for the fresh build), and
// fails t for every failed MUST item, printing the full report. profiles
// default to core plus the plugin's kind.
//
// The sandbox-fitness items (CORE-SANDBOX-001/002) run the plugin in its
// L2 container, which needs Docker and the runtime-docker adapter
// (FLUFFY_RUNTIME_ADAPTER, e.g. bin/plugins/runtime-docker/runtime-docker
// after `make build` in fluffy's checkout; never PATH or the plugin store).
// When either is missing the test fails and says how to fix it: without
// those items the plugin is not certified. An author who wants the rest of
// the suite anyway calls ConformanceWithoutSandbox instead.
//
//	func TestConformance(t *testing.T) {
//		plugintest.Conformance(t, ".", "plugin.yaml")
//	}
func Conformance(t testing.TB, pkg, manifest string, profiles ...string) *conformance.Report {
	t.Helper()
	return conformanceBuilt(t, pkg, manifest, false, profiles)
}

// ConformanceWithoutSandbox is Conformance for a machine without Docker,
// chosen explicitly: the sandbox-fitness items are skipped (the report says
// NOT CERTIFIED), every other MUST item must pass. With
// FLUFFY_REQUIRE_DOCKER=1 (CI) it behaves like Conformance.
func ConformanceWithoutSandbox(t testing.TB, pkg, manifest string, profiles ...string) *conformance.Report {
	t.Helper()
	return conformanceBuilt(t, pkg, manifest, os.Getenv(conformance.EnvRequireDocker) != "1", profiles)
}

func conformanceBuilt(t testing.TB, pkg, manifest string, noSandbox bool, profiles []string) *conformance.Report {
	t.Helper()
	bin := Build(t, pkg)
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	m, err := manifests.Parse(manifest, data)
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
	return conformanceDir(t, dir, noSandbox, profiles)
}

// ConformanceDir runs the suite on an already laid-out plugin directory
// (plugin.yaml with the right sha256 beside its binary), with the L2
// sandbox like Conformance.
func ConformanceDir(t testing.TB, dir string, profiles ...string) *conformance.Report {
	t.Helper()
	return conformanceDir(t, dir, false, profiles)
}

// sandboxFix is what to do when the L2 sandbox is missing.
const sandboxFix = "fix: start Docker and build fluffy's runtime adapter (`make build` in fluffy's checkout, then set FLUFFY_RUNTIME_ADAPTER=<checkout>/bin/plugins/runtime-docker/runtime-docker); or call plugintest.ConformanceWithoutSandbox to run the other items (the plugin is then not certified)"

func conformanceDir(t testing.TB, dir string, noSandbox bool, profiles []string) *conformance.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := conformance.Options{StubKernel: []string{Build(t, "github.com/fluffy-waffle/fluffy/conformance/cmd/stubkernel")}}
	if noSandbox {
		opts.SandboxReason = conformance.ReasonNoSandbox + " (plugintest.ConformanceWithoutSandbox)"
	} else {
		l2, reason, err := conformance.OpenL2(ctx, os.Getenv, nil)
		switch {
		case err != nil:
			t.Fatalf("conformance: the L2 sandbox failed to start: %v\nwithout it CORE-SANDBOX-001/002 cannot run and the plugin cannot be certified\n%s", err, sandboxFix)
		case l2 == nil:
			t.Fatalf("conformance: %s\nwithout it CORE-SANDBOX-001/002 cannot run and the plugin cannot be certified\n%s", reason, sandboxFix)
		}
		defer l2.Close()
		opts.Sandbox = l2.Launcher
	}
	rep, err := conformance.New(opts).Run(ctx, dir, profiles)
	if err != nil {
		t.Fatalf("conformance: %v", err)
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
