package kernel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// dockerKernel opens a kernel on ws with the real docker sandbox and
// tool-fs installed (skipping only when Docker is truly absent and
// FLUFFY_REQUIRE_DOCKER is unset).
func dockerKernel(t *testing.T, ws string) *Kernel {
	t.Helper()
	return dockerKernelIn(t, shortHome(t), ws)
}

// shortHome is a FLUFFY_HOME for a docker kernel: unix socket paths are
// limited to 108 bytes and t.TempDir() names are long.
func shortHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	return home
}

// dockerKernelIn is dockerKernel with the given home.
func dockerKernelIn(t *testing.T, home, ws string) *Kernel {
	t.Helper()
	return dockerKernelWith(t, home, ws, buildAdapter(t), false)
}

// buildAdapter builds the runtime-docker adapter for one test.
func buildAdapter(t *testing.T) string {
	t.Helper()
	adapter := filepath.Join(t.TempDir(), "runtime-docker")
	testbin.Into(t, "builtin-plugins/runtime-docker", adapter)
	return adapter
}

// dockerKernelWith is dockerKernelIn with the adapter at adapter and the
// sandbox prepared in the background or not.
func dockerKernelWith(t *testing.T, home, ws, adapter string, background bool) *Kernel {
	t.Helper()
	src := stage(t)
	ctx := context.Background()
	env := map[string]string{"FLUFFY_RUNTIME_ADAPTER": adapter, "DOCKER_HOST": os.Getenv("DOCKER_HOST"), sandbox.EnvRequireJail: os.Getenv(sandbox.EnvRequireJail)}
	k, err := Open(ctx, Options{Home: home, Workspace: ws, SandboxInBackground: background, Getenv: func(k string) string { return env[k] }, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})})
	if err != nil {
		if uerr.HasCode(err, "RUNTIME_UNREACHABLE") && os.Getenv("FLUFFY_REQUIRE_DOCKER") == "" {
			t.Skipf("Docker is not available: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
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
	return k
}

// TestSandboxPreparedInBackground: `fluffy kernel` opens its kernel before
// the docker sandbox is ready (most of a cold start); the first plugin
// call waits for it, and a sandbox that cannot be prepared fails that call
// with its own structured error instead of hanging it.
func TestSandboxPreparedInBackground(t *testing.T) {
	call := func(k *Kernel) (tool.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		return k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "1", OperationID: "op1", Tool: "fs.read", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil)
	}
	t.Run("ready", func(t *testing.T) {
		ws := t.TempDir()
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
		k := dockerKernelWith(t, shortHome(t), ws, buildAdapter(t), true)
		r, err := call(k)
		if err != nil && uerr.HasCode(err, "RUNTIME_UNREACHABLE") && os.Getenv("FLUFFY_REQUIRE_DOCKER") == "" {
			t.Skipf("Docker is not available: %v", err)
		}
		if err != nil || !r.OK || !strings.Contains(string(r.Output), `"     1\tone\n"`) {
			t.Fatalf("first call on a sandbox prepared in the background: %v %+v", err, r)
		}
		if st, _ := k.Plugins.Stats("tool-fs"); st.InstanceID == "" {
			t.Fatalf("tool-fs did not run in a sandbox instance: %+v", st)
		}
	})
	t.Run("adapter missing", func(t *testing.T) {
		ws := t.TempDir()
		os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
		k := dockerKernelWith(t, shortHome(t), ws, filepath.Join(t.TempDir(), "no-such-adapter"), true)
		_, err := call(k)
		if !uerr.HasCode(err, "RUNTIME_ADAPTER_MISSING") {
			t.Fatalf("a call on a sandbox that could not be prepared: want RUNTIME_ADAPTER_MISSING, got %v", err)
		}
		done := make(chan struct{})
		go func() { k.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Close hangs on a sandbox that failed to start")
		}
	})
}

// TestToolFSRunsInDockerSandbox is the whole path: an installed plugin,
// started lazily by the kernel inside an L2 container through the
// runtime-docker adapter, reading the read-only workspace and proposing a
// write that lands as a patch in the session's output directory, outside
// the project.
func TestToolFSRunsInDockerSandbox(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	k := dockerKernel(t, ws)
	ctx := context.Background()
	r, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "1", OperationID: "op1", Tool: "fs.read", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil)
	if err != nil || !r.OK || !strings.Contains(string(r.Output), `"     1\tone\n"`) {
		t.Fatalf("read in sandbox: %v %+v", err, r)
	}
	w, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "2", OperationID: "op2", Tool: "fs.write", Args: json.RawMessage(`{"path":"a.txt","content":"two\n"}`)}, nil)
	if err != nil || !w.OK || len(w.Changes) != 1 {
		t.Fatalf("write in sandbox: %v %+v", err, w)
	}
	st, _ := k.Plugins.Stats("tool-fs")
	art := filepath.Join(k.Session.Dir(), "out", st.InstanceID, w.Changes[0].Artifact)
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
	if _, err := os.Lstat(filepath.Join(ws, ".fluffy", "out")); !os.IsNotExist(err) {
		t.Fatalf("proposed changes must not be stored inside the project: %v", err)
	}
}

// TestSandboxSeesOnlyWhatThePolicyAllows, inside a real
// container: /workspace is the project minus every path the default policy
// denies tool-fs to read (.env, *.pem, .git/config), never .fluffy/ (the
// raw audit database), and a symlink named docs/notes.txt pointing at
// ../.env reads nothing. A 0600 file the policy allows is readable by the
// sandbox user all the same.
func TestSandboxSeesOnlyWhatThePolicyAllows(t *testing.T) {
	ws := t.TempDir()
	files := map[string]string{
		"src/main.go":  "package main\n",
		".env":         "API_KEY=sk-secret\n",
		"tls/key.pem":  "-----BEGIN PRIVATE KEY-----\n",
		".git/config":  "[remote \"origin\"]\n\turl = https://me:ghp_token@example.com/r.git\n",
		".git/HEAD":    "ref: refs/heads/main\n",
		"private.txt":  "mine\n",
		".env.example": "API_KEY=\n",
	}
	for p, c := range files {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644)
	}
	os.Chmod(filepath.Join(ws, "private.txt"), 0o600)
	os.MkdirAll(filepath.Join(ws, "docs"), 0o755)
	os.Symlink("../.env", filepath.Join(ws, "docs", "notes.txt"))
	k := dockerKernel(t, ws) // creates <ws>/.fluffy/db: the project's audit database
	ctx := context.Background()
	call := func(tl, args string) tool.Result {
		t.Helper()
		r, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "c", OperationID: "op", Tool: tl, Args: json.RawMessage(args)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, p := range []string{".env", "tls/key.pem", ".git/config", "docs/notes.txt", ".fluffy/db/MANIFEST", ".FLUFFY/db/MANIFEST"} {
		r := call("fs.read", `{"path":"`+p+`"}`)
		if r.OK || strings.Contains(string(r.Output), "secret") || strings.Contains(string(r.Output), "ghp_token") {
			t.Errorf("%s must not be readable at /workspace: %+v", p, r)
		}
	}
	for p, want := range map[string]string{"src/main.go": "package main", ".git/HEAD": "refs/heads/main", "private.txt": "mine", ".env.example": "API_KEY="} {
		if r := call("fs.read", `{"path":"`+p+`"}`); !r.OK || !strings.Contains(string(r.Output), want) {
			t.Errorf("%s must be readable: %+v", p, r)
		}
	}
	r := call("fs.list", `{"path":"","recursive":true}`)
	if !r.OK {
		t.Fatalf("list: %+v", r)
	}
	for _, hidden := range []string{".fluffy", `".env"`, "key.pem", ".git/config", "notes.txt"} {
		if strings.Contains(string(r.Output), hidden) {
			t.Errorf("/workspace listing shows %s: %s", hidden, r.Output)
		}
	}
}
