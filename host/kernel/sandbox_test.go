package kernel

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk/patch"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// TestToolFSRunsInDockerSandbox is the whole path: an installed plugin,
// started lazily by the kernel inside an L2 container through the
// runtime-docker adapter, reading the read-only workspace and proposing a
// write that lands as a patch in the host's output directory.
func TestToolFSRunsInDockerSandbox(t *testing.T) {
	// Unix socket paths are limited to 108 bytes; t.TempDir() names are long.
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	adapter := filepath.Join(t.TempDir(), "runtime-docker")
	cmd := exec.Command("go", "build", "-o", adapter, "../../builtin-plugins/runtime-docker")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	src := stage(t)
	ctx := context.Background()
	env := map[string]string{"FLUFFY_RUNTIME_ADAPTER": adapter, "DOCKER_HOST": os.Getenv("DOCKER_HOST")}
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Getenv: func(k string) string { return env[k] }, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})})
	if err != nil {
		if uerr.HasCode(err, "RUNTIME_UNREACHABLE") && os.Getenv("FLUFFY_REQUIRE_DOCKER") == "" {
			t.Skipf("Docker is not available: %v", err)
		}
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := k.Registry.Install(ctx, src, registry.InstallOptions{BuiltinDirs: []string{filepath.Dir(src)}}); err != nil {
		t.Fatal(err)
	}
	spec, err := k.Registry.Runnable("tool-fs")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Plugins.Add(spec); err != nil {
		t.Fatal(err)
	}
	r, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "1", OperationID: "op1", Tool: "fs.read", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil)
	if err != nil || !r.OK || !strings.Contains(string(r.Output), `"one\n"`) {
		t.Fatalf("read in sandbox: %v %+v", err, r)
	}
	w, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "2", OperationID: "op2", Tool: "fs.write", Args: json.RawMessage(`{"path":"a.txt","content":"two\n"}`)}, nil)
	if err != nil || !w.OK || len(w.Changes) != 1 {
		t.Fatalf("write in sandbox: %v %+v", err, w)
	}
	st, _ := k.Plugins.Stats("tool-fs")
	art := filepath.Join(ws, ".fluffy", "out", st.InstanceID, w.Changes[0].Artifact)
	d, err := os.ReadFile(art)
	if err != nil {
		t.Fatalf("artifact not on the host: %v", err)
	}
	got, err := patch.Apply([]byte("one\n"), string(d))
	if err != nil || string(got) != "two\n" {
		t.Fatalf("patch: %v %q", err, got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\n" {
		t.Fatal("the sandboxed plugin changed the project")
	}
}
