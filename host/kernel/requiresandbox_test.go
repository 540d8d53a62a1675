package kernel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// l2ReadPolicy allows reading only from inside an L2 sandbox.
const l2ReadPolicy = `version: 1
capabilities:
  - name: read-in-l2
    match: { syscall: ["fs.read", "fs.list", "fs.exists", "fs.stat"], path_glob: ["**"] }
    action: allow
    constraints: { require_sandbox: L2 }
`

// stageKernelFixture lays out the fixture plugin with fixtureManifest
// (its fx.kernel tool calls the kernel back).
func stageKernelFixture(t *testing.T) string {
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
	stamped, _ := manifests.StampSHA256([]byte(fixtureManifest), sum)
	os.WriteFile(filepath.Join(dir, manifests.FileName), stamped, 0o644)
	return dir
}

// writePolicy writes the project's policy file approved (pinned), as
// `fluffy policy update` does, so the kernel applies it.
func writePolicy(t *testing.T, home, ws, text string) {
	t.Helper()
	approvedWrite(t, home, ws, []byte(text))
}

func kernelRead(t *testing.T, k *Kernel, p string) map[string]string {
	t.Helper()
	r, err := k.Plugins.CallTool(context.Background(), "fixture", tool.Call{ID: "k", Tool: "fx.kernel", Args: json.RawMessage(`{"path":"` + p + `"}`)}, nil)
	if err != nil || !r.OK {
		t.Fatalf("fx.kernel: %v %+v", err, r)
	}
	out := map[string]string{}
	json.Unmarshal(r.Output, &out)
	return out
}

// TestRequireSandboxL2MatchesOnlyInTheSandbox: an allow rule with
// require_sandbox: L2 lets a plugin that really runs in an L2 container
// read, both through its /workspace view and through the kernel's ReadFile
// callback, and lets the same plugin run unsandboxed read nothing. The
// decision is audited with the sandbox template.
func TestRequireSandboxL2MatchesOnlyInTheSandbox(t *testing.T) {
	fixture := stageKernelFixture(t)
	ctx := context.Background()

	t.Run("unsandboxed", func(t *testing.T) {
		home, ws := t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("visible\n"), 0o644)
		writePolicy(t, home, ws, l2ReadPolicy)
		k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		if _, err := k.Registry.Install(ctx, fixture, registry.InstallOptions{Yes: true}); err != nil {
			t.Fatal(err)
		}
		spec, _ := k.Registry.Runnable("fixture")
		if err := k.Plugins.Add(spec); err != nil {
			t.Fatal(err)
		}
		out := kernelRead(t, k, "a.txt")
		if out["content"] != "" || !strings.Contains(out["read_error"], "POLICY_DENIED") {
			t.Fatalf("an unsandboxed plugin must not match require_sandbox: L2: %v", out)
		}
	})

	t.Run("docker", func(t *testing.T) {
		ws := t.TempDir()
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("visible\n"), 0o644)
		home := shortHome(t)
		writePolicy(t, home, ws, l2ReadPolicy)
		k := dockerKernelIn(t, home, ws)
		// The view: tool-fs reads /workspace inside its container.
		r, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "1", OperationID: "op1", Tool: "fs.read", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil)
		if err != nil || !r.OK || !strings.Contains(string(r.Output), "visible") {
			t.Fatalf("a sandboxed plugin's view must show what require_sandbox: L2 allows: %v %+v", err, r)
		}
		// The callback: the kernel reads for the sandboxed plugin.
		if _, err := k.Registry.Install(ctx, fixture, registry.InstallOptions{Yes: true}); err != nil {
			t.Fatal(err)
		}
		spec, _ := k.Registry.Runnable("fixture")
		if err := k.Plugins.Add(spec); err != nil {
			t.Fatal(err)
		}
		if out := kernelRead(t, k, "a.txt"); out["content"] != "visible\n" {
			t.Fatalf("a sandboxed plugin's ReadFile must match require_sandbox: L2: %v", out)
		}
		k.Audit.Flush()
		evs, _ := k.Audit.Recent(ctx, 20, audit.EventSyscall)
		found := false
		for _, e := range evs {
			if e.Caller == "fixture" && e.SyscallType == "fs.read" && e.Metadata["sandbox"] != "" && e.PolicyDecision == audit.DecisionAllowed {
				found = true
			}
		}
		if !found {
			t.Fatalf("no allowed fs.read of fixture audited with its sandbox: %+v", evs)
		}
	})
}
