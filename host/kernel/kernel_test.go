package kernel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// stage builds tool-fs and lays it out with a stamped manifest.
func stage(t *testing.T) string {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool-fs")
	testbin.Into(t, "builtin-plugins/tool-fs", bin)
	data, _ := os.ReadFile("../../builtin-plugins/tool-fs/plugin.yaml")
	sum, _ := manifests.FileSHA256(bin)
	stamped, err := manifests.StampSHA256(data, sum)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "plugin.yaml"), stamped, 0o644)
	return dir
}

func regState(t *testing.T, k *Kernel, name string) registry.State {
	r, err := k.Registry.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

func TestLifecycleStates(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("x\n"), 0o644)
	src := stage(t)
	ctx := context.Background()

	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Registry.Install(ctx, src, registry.InstallOptions{BuiltinDirs: []string{filepath.Dir(src)}}); err != nil {
		t.Fatal(err)
	}
	if got := regState(t, k, "tool-fs"); got != registry.StateRegistered {
		t.Fatalf("after install: %s", got)
	}
	k.Close()

	k, err = Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	if got := k.PluginState("tool-fs"); got != registry.StateLoaded {
		t.Fatalf("after kernel open (lazy, not started): %s", got)
	}
	// The shared registry records no per-kernel state (one
	// meaning for plugin list's STATE).
	if got := regState(t, k, "tool-fs"); got != registry.StateRegistered {
		t.Fatalf("registry state after kernel open: %s, want registered", got)
	}
	r, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "1", Tool: "fs.exists", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil)
	if err != nil || !r.OK {
		t.Fatalf("%v %+v", err, r)
	}
	if got := k.PluginState("tool-fs"); got != registry.StateActive {
		t.Fatalf("after first use: %s", got)
	}
	if got := regState(t, k, "tool-fs"); got != registry.StateRegistered {
		t.Fatalf("registry state while it runs: %s, want registered", got)
	}
	// Disabled plugins are not loaded by the next kernel.
	if err := k.Registry.Disable(ctx, "tool-fs", "testing"); err != nil {
		t.Fatal(err)
	}
	k.Close()
	k, err = Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if got := regState(t, k, "tool-fs"); got != registry.StateDisabled {
		t.Fatalf("disabled plugin state: %s", got)
	}
	if _, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "2", Tool: "fs.exists", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil); err == nil {
		t.Fatal("a disabled plugin must not run")
	}
}

func TestUnloadedOnClose(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	ctx := context.Background()
	src := stage(t)
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone})
	if err != nil {
		t.Fatal(err)
	}
	k.Registry.Install(ctx, src, registry.InstallOptions{BuiltinDirs: []string{filepath.Dir(src)}})
	k.Close()
	k, _ = Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone})
	k.Plugins.Tools(ctx, "tool-fs")
	k.Plugins.Close()
	if got := k.PluginState("tool-fs"); got != registry.StateUnloaded {
		t.Fatalf("after close: %s", got)
	}
	if got := regState(t, k, "tool-fs"); got != registry.StateRegistered {
		t.Fatalf("registry state after close: %s, want registered", got)
	}
	k.Close()
}

func TestKernelAuditsStartInstallAndShutdown(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	ctx := context.Background()
	src := stage(t)
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Registry.Install(ctx, src, registry.InstallOptions{BuiltinDirs: []string{filepath.Dir(src)}}); err != nil {
		t.Fatal(err)
	}
	installs, err := k.HomeAudit.Recent(ctx, 10, "plugin_install")
	if err != nil || len(installs) != 1 || installs[0].Metadata["plugin"] != "tool-fs" || installs[0].Metadata["sha256"] == "" {
		t.Fatalf("install not audited: %v %+v", err, installs)
	}
	k.Close()
	log, err := audit.Open(ctx, audit.Options{Dir: store.DefaultDir(ws)})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	for _, typ := range []audit.EventType{audit.EventKernelStart, audit.EventKernelShutdown} {
		if recs, err := log.Recent(ctx, 1, typ); err != nil || len(recs) != 1 {
			t.Fatalf("%s not recorded: %v", typ, err)
		}
	}
	if rep, err := log.Verify(ctx, true); err != nil || !rep.OK() {
		t.Fatalf("chain: %v %+v", err, rep)
	}
}

func TestBuiltinPluginsAreDiscovered(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("x\n"), 0o644)
	src := stage(t) // a directory holding tool-fs and its stamped plugin.yaml
	builtin := filepath.Dir(src)
	ctx := context.Background()
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, BuiltinDirs: []string{builtin}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	r, err := k.Registry.Get("tool-fs")
	if err != nil || !r.HasTag(registry.TagCore) || r.Dir != src {
		t.Fatalf("discovered: %v %+v", err, r)
	}
	res, err := k.Plugins.CallTool(ctx, "tool-fs", tool.Call{ID: "1", Tool: "fs.exists", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil)
	if err != nil || !res.OK {
		t.Fatalf("builtin plugin not usable without install: %v %+v", err, res)
	}
}
