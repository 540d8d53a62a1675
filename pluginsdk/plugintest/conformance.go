package plugintest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
// The sandbox-fitness items run in an L2 container when Docker and the
// runtime-docker adapter (FLUFFY_RUNTIME_ADAPTER, e.g. bin/plugins/runtime-docker/runtime-docker
// after `make build`; never PATH or the plugin store) are
// available; with FLUFFY_REQUIRE_DOCKER=1 their absence fails the test,
// otherwise they are reported as skipped.
//
//	func TestConformance(t *testing.T) {
//		plugintest.Conformance(t, ".", "plugin.yaml")
//	}
func Conformance(t testing.TB, pkg, manifest string, profiles ...string) *conformance.Report {
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
	return ConformanceDir(t, dir, profiles...)
}

// ConformanceDir runs the suite on an already laid-out plugin directory
// (plugin.yaml with the right sha256 beside its binary).
func ConformanceDir(t testing.TB, dir string, profiles ...string) *conformance.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := conformance.Options{StubKernel: []string{Build(t, "github.com/fluffy-waffle/fluffy/conformance/cmd/stubkernel")}}
	l2, reason, err := conformance.OpenL2(ctx, os.Getenv, nil)
	require := os.Getenv(conformance.EnvRequireDocker) == "1"
	switch {
	case err != nil && require:
		t.Fatalf("conformance: FLUFFY_REQUIRE_DOCKER=1 but the L2 sandbox failed: %v", err)
	case l2 == nil && require:
		t.Fatalf("conformance: FLUFFY_REQUIRE_DOCKER=1 but %s", reason)
	case err != nil:
		opts.SandboxReason = conformance.ReasonNoSandbox + ": " + err.Error()
	case l2 == nil:
		opts.SandboxReason = reason
	default:
		defer l2.Close()
		opts.Sandbox = l2.Launcher
	}
	rep, err := conformance.New(opts).Run(ctx, dir, profiles)
	if err != nil {
		t.Fatalf("conformance: %v", err)
	}
	var b bytes.Buffer
	_ = rep.WriteText(&b)
	if !rep.Passed() {
		t.Errorf("the plugin fails fluffy's conformance suite:\n%s", b.String())
	} else {
		t.Logf("%s", b.String())
	}
	return rep
}
