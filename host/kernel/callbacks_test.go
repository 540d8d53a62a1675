package kernel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/callbacks"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

const fixtureManifest = `name: fixture
version: 1.0.0
kind: tool
description: "misbehaving test plugin"
author: tests
entry: fixture
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
tags: [core_plugin]
required_capabilities: [fs.read]
tools:
  - name: fx.kernel
    summary: "call the kernel back"
    parameters: {type: object}
  - name: fx.kernel_flood
    summary: "flood the kernel with callbacks"
    parameters: {type: object}
  - name: fx.token
    summary: "read with a capability token"
    parameters: {type: object}
`

// TestPluginCallbacksArePolicyChecked: a real plugin process calls back
// into the kernel through the GRPCBroker. Reads go through the project
// policy (a secret is refused), capability tokens are issued bound to the
// instance, and both land in the audit log.
func TestPluginCallbacksArePolicyChecked(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("visible\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".env"), []byte("API_KEY=secret\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "docs"), 0o755)
	os.Symlink("../.env", filepath.Join(ws, "docs", "notes.txt"))
	os.Symlink("../a.txt", filepath.Join(ws, "docs", "a-link.txt"))
	dir := t.TempDir()
	bin := filepath.Join(dir, "fixture")
	testbin.Into(t, "internal/fixtures/tool-misbehave", bin)
	sum, _ := manifests.FileSHA256(bin)
	stamped, _ := manifests.StampSHA256([]byte(fixtureManifest), sum)
	os.WriteFile(filepath.Join(dir, "plugin.yaml"), stamped, 0o644)

	ctx := context.Background()
	var progress []string
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, Progress: func(s string) { progress = append(progress, s) }})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := k.Registry.Install(ctx, dir, registry.InstallOptions{Yes: true}); err != nil {
		t.Fatal(err)
	}
	spec, _ := k.Registry.Runnable("fixture")
	if !slices.Contains(spec.Tags, "third_party") || slices.Contains(spec.Tags, "core_plugin") {
		t.Fatalf("a self-declared core plugin must run as third_party, tags %v", spec.Tags)
	}
	if err := k.Plugins.Add(spec); err != nil {
		t.Fatal(err)
	}
	call := func(p string) map[string]string {
		r, err := k.Plugins.CallTool(ctx, "fixture", tool.Call{ID: "k", Tool: "fx.kernel", Args: json.RawMessage(`{"path":"` + p + `"}`)}, nil)
		if err != nil || !r.OK {
			t.Fatalf("%v %+v", err, r)
		}
		out := map[string]string{}
		json.Unmarshal(r.Output, &out)
		return out
	}
	ok := call("a.txt")
	if ok["content"] != "visible\n" || ok["sha256"] == "" || ok["token"] == "" {
		t.Fatalf("allowed read/capability: %v", ok)
	}
	denied := call(".env")
	if denied["content"] != "" || !strings.Contains(denied["read_error"], "POLICY_DENIED") || !strings.Contains(denied["capability_error"], "POLICY_DENIED") {
		t.Fatalf("secret read must be refused: %v", denied)
	}
	if len(progress) == 0 || !strings.Contains(progress[len(progress)-1], "plugin fixture says: called back") {
		t.Fatalf("progress not relayed: %v", progress)
	}
	k.Audit.Flush()
	decisions, _ := k.Audit.Recent(ctx, 10, audit.EventSyscall)
	var sawDeny bool
	for _, d := range decisions {
		if d.Metadata["path"] == ".env" && d.PolicyDecision == audit.DecisionDenied && d.Caller == "fixture" {
			sawDeny = true
		}
	}
	issued, _ := k.Audit.Recent(ctx, 10, audit.EventCapabilityIssued)
	if !sawDeny || len(issued) != 1 || issued[0].CapabilityID != ok["token"] {
		t.Fatalf("audit: deny recorded %v, capabilities %+v", sawDeny, issued)
	}
	// Judged by what they name after resolving links, from the plugin's own
	// view: a link to .env reads nothing, a link to an allowed file works;
	// the kernel's .fluffy/ (the raw audit database) is never served.
	if viaLink := call("docs/notes.txt"); viaLink["content"] != "" || viaLink["read_error"] == "" {
		t.Fatalf("a symlink to .env must not read it: %v", viaLink)
	}
	if ok := call("docs/a-link.txt"); ok["content"] != "visible\n" {
		t.Fatalf("a symlink to an allowed file reads it: %v", ok)
	}
	for _, p := range []string{".fluffy/db/MANIFEST", ".FLUFFY/db/MANIFEST", "docs/../.fluffy/db/MANIFEST"} {
		if db := call(p); db["content"] != "" || !strings.Contains(db["read_error"], "POLICY_DENIED") {
			t.Fatalf("%s must be refused: %v", p, db)
		}
	}

	// A flood of callbacks with 60 KB paths is
	// rate-limited per instance, and what it leaves in the audit log is
	// bounded per record.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(k.Audit.Flush())
	before, err := k.Audit.Stats(ctx)
	must(err)
	start := time.Now()
	r, err := k.Plugins.CallTool(ctx, "fixture", tool.Call{ID: "f", Tool: "fx.kernel_flood", Args: json.RawMessage(`{"count":2000,"path_bytes":60000}`)}, nil)
	elapsed := time.Since(start)
	if err != nil || !r.OK {
		t.Fatalf("%v %+v", err, r)
	}
	codes := map[string]int{}
	must(json.Unmarshal(r.Output, &codes))
	allowed := 2000 - codes[callbacks.CodeRateLimited]
	if max := callbacks.CallbackBurst + int(elapsed.Seconds()*callbacks.CallbackRate) + 1; allowed > max || codes["transport"] != 0 {
		t.Fatalf("%d callbacks served in %s (at most %d): %v", allowed, elapsed, max, codes)
	}
	must(k.Audit.Flush())
	after, err := k.Audit.Stats(ctx)
	must(err)
	recs := after.Records - before.Records
	if recs > uint64(2*allowed+2) {
		t.Fatalf("%d audit records for %d served callbacks", recs, allowed)
	}
	if grew := after.Bytes - before.Bytes; recs > 0 && grew/int64(recs) > 16<<10 {
		t.Fatalf("audit grew %d bytes for %d records", grew, recs)
	}
	t.Logf("flood: %v in %s, %d audit records, %d bytes", codes, elapsed, recs, after.Bytes-before.Bytes)
}
