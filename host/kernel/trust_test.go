package kernel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// fixtureBin is internal/fixtures/tool-misbehave, built once per test process.
func fixtureBin(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, "internal/fixtures/tool-misbehave")
}

// stageFixture lays out the fixture plugin (it serves as "fixture" 1.0.0)
// under name with a manifest whose extra lines are added verbatim.
func stageFixture(t *testing.T, name, extra string) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(fixtureBin(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "fixture")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	sum, _ := manifests.FileSHA256(bin)
	man := "name: " + name + "\nversion: 1.0.0\nkind: tool\ndescription: fixture\nauthor: tests\nentry: fixture\nsha256: " + sum +
		"\napi_versions: [1, 2]\n" + extra +
		"tools:\n  - name: fx.echo\n    summary: echo\n    parameters: {type: object}\n  - name: fx.sleep\n    summary: sleep\n    parameters: {type: object}\n"
	if err := os.WriteFile(filepath.Join(dir, manifests.FileName), []byte(man), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openNone(t *testing.T, home, ws string, pol *policy.Policy) *Kernel {
	t.Helper()
	o := Options{Home: home, Workspace: ws, Sandbox: SandboxNone}
	if pol != nil {
		o.Policy = policy.NewEngine(pol, policy.Options{})
	}
	k, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// TestManifestTagsAreRequestsNotGrants: a third-party manifest
// that lists trusted_write used to keep it and so switch off the default
// policy's third-party-no-writes rule. The tag now counts only once the user
// granted it, and the grant is recorded and audited.
func TestManifestTagsAreRequestsNotGrants(t *testing.T) {
	ctx := context.Background()
	home, ws := t.TempDir(), t.TempDir()
	src := stageFixture(t, "fixture", "tags: [trusted_write]\n")
	k := openNone(t, home, ws, nil)
	rec, err := k.Registry.Install(ctx, src, registry.InstallOptions{Yes: true})
	if err != nil {
		t.Fatal(err)
	}
	if rec.HasTag(registry.TagTrustedWrite) || !rec.HasTag(registry.TagThirdParty) || len(rec.RequestedTags) != 1 {
		t.Fatalf("installed record tags %v (requested %v)", rec.Tags, rec.RequestedTags)
	}
	pol, err := policy.Default()
	if err != nil {
		t.Fatal(err)
	}
	eng := policy.NewEngine(pol, policy.Options{})
	write := func() policy.Result {
		spec, err := k.Registry.Runnable("fixture")
		if err != nil {
			t.Fatal(err)
		}
		return eng.Evaluate(ctx, policy.Request{Syscall: "fs.write", Path: "src/a.go", Sandbox: "code-executor", Caller: callerOf(spec, "i1")})
	}
	if res := write(); res.Enforced != policy.RequireReview || res.DecidingRule() != "third-party-no-writes" {
		t.Fatalf("ungranted trusted_write: %v by %s, want review by third-party-no-writes", res.Enforced, res.DecidingRule())
	}
	if err := k.Registry.Grant(ctx, "fixture", registry.TagTrustedWrite); err != nil {
		t.Fatal(err)
	}
	if res := write(); res.Enforced != policy.Allow {
		t.Fatalf("granted trusted_write: %v (%v)", res.Enforced, res.Reasons)
	}
	recs, err := k.HomeAudit.Recent(ctx, 10, "plugin_tag_grant")
	if err != nil || len(recs) != 1 || recs[0].Metadata["granted_tags"] != registry.TagTrustedWrite {
		t.Fatalf("grant audit: %v %+v", err, recs)
	}
	if err := k.Registry.Revoke(ctx, "fixture", registry.TagTrustedWrite); err != nil {
		t.Fatal(err)
	}
	if res := write(); res.Enforced != policy.RequireReview {
		t.Fatalf("after revoke: %v", res.Enforced)
	}
	// core_plugin cannot be granted: it follows from where a plugin lives.
	if err := k.Registry.Grant(ctx, "fixture", registry.TagCore); !uerr.HasCode(err, "USAGE") {
		t.Fatalf("granting core_plugin: %v", err)
	}
	// Granted at install, on the user's word.
	k2 := openNone(t, t.TempDir(), t.TempDir(), nil)
	rec, err = k2.Registry.Install(ctx, src, registry.InstallOptions{Yes: true, Grant: []string{registry.TagTrustedWrite}})
	if err != nil || !rec.HasTag(registry.TagTrustedWrite) || len(rec.GrantedTags) != 1 {
		t.Fatalf("install --grant: %v %+v", err, rec)
	}
}

// TestBuiltinNamesAreReserved: a third-party plugin named
// tool-fs 9.9.9 used to replace the builtin tool-fs silently.
func TestBuiltinNamesAreReserved(t *testing.T) {
	ctx := context.Background()
	home, ws := t.TempDir(), t.TempDir()
	builtin := t.TempDir()
	copyDir(t, stage(t), filepath.Join(builtin, "tool-fs"))
	k := openNone(t, home, ws, nil)
	src := stageFixture(t, "tool-fs", "")
	man := filepath.Join(src, manifests.FileName)
	b, _ := os.ReadFile(man)
	os.WriteFile(man, []byte(strings.Replace(string(b), "version: 1.0.0", "version: 9.9.9", 1)), 0o644)
	_, err := k.Registry.Install(ctx, src, registry.InstallOptions{Yes: true, BuiltinDirs: []string{builtin}})
	if !uerr.HasCode(err, registry.CodeReservedName) || !strings.Contains(err.Error(), "tool-fs") {
		t.Fatalf("third-party tool-fs 9.9.9: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, "plugins", "tool-fs")); !os.IsNotExist(err) {
		t.Fatalf("refused plugin reached the store: %v", err)
	}
	// Reserved even when fluffy's builtin directory is not found.
	if _, err := k.Registry.Install(ctx, src, registry.InstallOptions{Yes: true}); !uerr.HasCode(err, registry.CodeReservedName) {
		t.Fatalf("without builtin dirs: %v", err)
	}
	// A name found in a builtin directory is reserved too.
	copyDir(t, stageFixture(t, "tool-extra", ""), filepath.Join(builtin, "tool-extra"))
	other := stageFixture(t, "tool-extra", "")
	if _, err := k.Registry.Install(ctx, other, registry.InstallOptions{Yes: true, BuiltinDirs: []string{builtin}}); !uerr.HasCode(err, registry.CodeReservedName) {
		t.Fatalf("name from a builtin dir: %v", err)
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := e.Info()
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, fi.Mode()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTemplateLimitsAreCeilings: a manifest timeout of 24h used
// to beat the policy-sandbox template's 100 ms (a call ran for seconds).
// Raising a limit is now refused when the manifest is loaded, with the
// template's value in the message, and the template's own timeout is the
// call deadline.
func TestTemplateLimitsAreCeilings(t *testing.T) {
	ctx := context.Background()
	home, ws := t.TempDir(), t.TempDir()
	k := openNone(t, home, ws, nil)

	raised := stageFixture(t, "fixture", "sandbox: {template: policy-sandbox, timeout: 24h}\n")
	_, err := k.Registry.Install(ctx, raised, registry.InstallOptions{Yes: true})
	if !uerr.HasCode(err, "SANDBOX_LIMIT_ABOVE_TEMPLATE") || !strings.Contains(err.Error(), "100ms") || !strings.Contains(err.Error(), "24h") {
		t.Fatalf("raised timeout: %v", err)
	}
	for _, extra := range []string{"sandbox: {template: code-executor, memory: 2GiB}\n", "sandbox: {template: ai-provider, pids: 500}\n"} {
		if _, err := k.Registry.Install(ctx, stageFixture(t, "fixture", extra), registry.InstallOptions{Yes: true}); !uerr.HasCode(err, "SANDBOX_LIMIT_ABOVE_TEMPLATE") {
			t.Fatalf("%s: %v", extra, err)
		}
	}

	// No override: the template's 100 ms bounds the call.
	if _, err := k.Registry.Install(ctx, stageFixture(t, "fixture", "sandbox: {template: policy-sandbox}\n"), registry.InstallOptions{Yes: true}); err != nil {
		t.Fatal(err)
	}
	k.Close()
	k = openNone(t, home, ws, nil)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// Start it first: the deadline is the call's, not the start's.
	if _, err := k.Plugins.CallTool(cctx, "fixture", tool.Call{ID: "1", Tool: "fx.echo", Args: json.RawMessage(`{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = k.Plugins.CallTool(cctx, "fixture", tool.Call{ID: "2", Tool: "fx.sleep", Args: json.RawMessage(`{"ignore_cancel":true}`)}, nil)
	if !uerr.HasCode(err, "PLUGIN_CALL_TIMEOUT") {
		t.Fatalf("sleeping call: %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("the 100 ms template deadline was not applied: the call ran %s", el)
	}
}

// TestIntegrationTestTemplateNeedsPolicyOptIn: the
// integration-test template's opt-in by policy was never checked. A plugin
// that asks for it does not start unless the project policy allows
// sandbox.start there.
func TestIntegrationTestTemplateNeedsPolicyOptIn(t *testing.T) {
	ctx := context.Background()
	home, ws := t.TempDir(), t.TempDir()
	src := stageFixture(t, "fixture", "sandbox: {template: integration-test}\n")
	k := openNone(t, home, ws, nil)
	if _, err := k.Registry.Install(ctx, src, registry.InstallOptions{Yes: true}); err != nil {
		t.Fatal(err)
	}
	k.Close()

	k = openNone(t, home, ws, nil)
	_, err := k.Plugins.CallTool(ctx, "fixture", tool.Call{ID: "1", Tool: "fx.echo", Args: json.RawMessage(`{}`)}, nil)
	if !uerr.HasCode(err, "POLICY_DENIED") || !strings.Contains(err.Error(), "integration-test") || !strings.Contains(err.Error(), "sandbox.start") {
		t.Fatalf("without opt-in: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "started-fixture")); !os.IsNotExist(err) {
		t.Fatalf("the plugin ran although the policy did not opt in: %v", err)
	}
	k.Close()

	optIn := string(policy.DefaultYAML()) + `
  - name: fixture-integration-tests
    match: { syscall: sandbox.start, plugin: fixture }
    action: allow
    constraints: { require_sandbox: integration-test }
`
	pol, err := policy.Load("opt-in.yaml", []byte(optIn))
	if err != nil {
		t.Fatal(err)
	}
	k = openNone(t, home, ws, pol)
	if _, err := k.Plugins.CallTool(ctx, "fixture", tool.Call{ID: "2", Tool: "fx.echo", Args: json.RawMessage(`{}`)}, nil); err != nil {
		t.Fatalf("with opt-in: %v", err)
	}
}
