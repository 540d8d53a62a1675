package kernel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/policy"
)

// stagePolicyExt lays out internal/fixtures/policy-misbehave as the policy plugin
// ext-good (it denies fs.write under secret/ and abstains otherwise).
func stagePolicyExt(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "good") // the fixture serves as "ext-" + its file name
	testbin.Into(t, "internal/fixtures/policy-misbehave", bin)
	sum, _ := manifests.FileSHA256(bin)
	man := "name: ext-good\nversion: 1.0.0\nkind: policy\ndescription: test policy extension\nauthor: tests\nentry: good\nsha256: " + sum + "\napi_versions: [1, 2]\n"
	if err := os.WriteFile(filepath.Join(dir, manifests.FileName), []byte(man), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestKernelConsultsPolicyExtensions: the policy's `extensions:` list
// names installed policy plugins, and the kernel's engine consults them
// after the YAML rules: the real plugin's deny wins over a YAML allow. An
// extension the policy names but the kernel cannot run denies (the policy
// never gets more permissive because a plugin is missing), and a policy
// reloaded without extensions stops consulting them.
func TestKernelConsultsPolicyExtensions(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	ctx := context.Background()
	// The plugin is installed by a first kernel, as `fluffy plugin install` does.
	k0, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k0.Registry.Install(ctx, stagePolicyExt(t), registry.InstallOptions{Yes: true}); err != nil {
		k0.Close()
		t.Fatal(err)
	}
	k0.Close()

	rules := "version: 1\ncapabilities:\n  - name: writes\n    match: { syscall: fs.write, path_glob: [\"secret/**\", \"src/**\"] }\n    action: allow\n"
	writePolicy(t, home, ws, rules+"extensions: [ext-good]\n")
	var progress []string
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, PolicyReloadInterval: 20 * time.Millisecond, Progress: func(s string) { progress = append(progress, s) }})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if st, _ := k.Plugins.Stats("ext-good"); !st.Running {
		t.Fatalf("the extension was not started at open (warm-up): %+v %+v %q", st, k.Policy.Extensions(), progress)
	}
	write := func(p string) policy.Result {
		return k.Policy.Evaluate(ctx, policy.Request{Syscall: "fs.write", Path: p, Caller: policy.Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool"}})
	}
	res := write("secret/key")
	if res.Enforced != policy.Deny || res.Deciding[0].Rule != "extension:ext-good" || !strings.Contains(strings.Join(res.Reasons, ";"), "secret/ is off limits") {
		t.Fatalf("the extension's deny must win over the YAML allow: %+v", res)
	}
	if res := write("src/a.go"); res.Enforced != policy.Allow {
		t.Fatalf("the extension abstains on src/: %+v", res)
	}

	reload := func(text string) {
		t.Helper()
		old := k.Policy.Policy().Hash
		writePolicy(t, home, ws, text)
		waitFor(t, func() bool { return k.Policy.Policy().Hash != old }, "the policy to reload")
	}
	reload(rules + "extensions: [ext-absent]\n")
	if res := write("src/a.go"); res.Enforced != policy.Deny || !strings.Contains(strings.Join(res.Reasons, ";"), "ext-absent") {
		t.Fatalf("a named extension that is not loaded must deny: %+v", res)
	}
	reload(rules)
	if res := write("secret/key"); res.Enforced != policy.Allow {
		t.Fatalf("a policy without extensions consults none: %+v", res)
	}
}

// TestKernelConsultsPolicyExtensionInDocker: the same extension in its
// policy-sandbox container, connected when a reloaded policy names it.
func TestKernelConsultsPolicyExtensionInDocker(t *testing.T) {
	ws := t.TempDir()
	home := shortHome(t)
	rules := "version: 1\ncapabilities:\n  - name: writes\n    match: { syscall: fs.write, path_glob: [\"secret/**\", \"src/**\"] }\n    action: allow\n"
	writePolicy(t, home, ws, rules)
	k := dockerKernelIn(t, home, ws)
	ctx := context.Background()
	if _, err := k.Registry.Install(ctx, stagePolicyExt(t), registry.InstallOptions{Yes: true}); err != nil {
		t.Fatal(err)
	}
	spec, err := k.Registry.Runnable("ext-good")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Plugins.Add(spec); err != nil {
		t.Fatal(err)
	}
	old := k.Policy.Policy().Hash
	writePolicy(t, home, ws, rules+"extensions: [ext-good]\n")
	deadline := time.Now().Add(2 * time.Minute)
	for k.Policy.Policy().Hash == old {
		if time.Now().After(deadline) {
			t.Fatal("policy not reloaded")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, _ := k.Plugins.Stats("ext-good"); !st.Running {
		t.Fatalf("the extension was not started by the reload: %+v", st)
	}
	write := func(p string) policy.Result {
		return k.Policy.Evaluate(ctx, policy.Request{Syscall: "fs.write", Path: p, Caller: policy.Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool"}})
	}
	if res := write("secret/key"); res.Enforced != policy.Deny || res.Deciding[0].Rule != "extension:ext-good" {
		t.Fatalf("the contained extension's deny must win: %+v", res)
	}
	if res := write("src/a.go"); res.Enforced != policy.Allow {
		t.Fatalf("the contained extension abstains on src/: %+v", res)
	}
}
