package kerneltest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// Build compiles a main package of this repository (a path relative to the
// repository root, e.g. "builtin-plugins/tool-search") statically, once per
// test process, and returns the binary's path.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	return testbin.Build(tb, pkg, testbin.Flags("-trimpath"), testbin.LDFlags("-s -w"))
}

// staged are the plugin directories Stage laid out in this process: each
// once, as its binary may already be running when another test asks.
var staged sync.Map // package dir → *stagedDir

type stagedDir struct {
	once sync.Once
	dir  string
	err  error
}

// Stage builds a builtin plugin and puts it with its stamped plugin.yaml in
// a directory of its own, ready to install; it returns that directory. All
// staged directories share one parent (the builtin plugin directory) and
// each is named after its plugin.
func Stage(tb testing.TB, pkg string) string {
	tb.Helper()
	v, _ := staged.LoadOrStore(pkg, &stagedDir{})
	s := v.(*stagedDir)
	s.once.Do(func() { s.dir, s.err = stage(pkg) })
	if s.err != nil {
		tb.Fatal(s.err)
	}
	return s.dir
}

func stage(pkg string) (string, error) {
	root, err := testbin.Dir()
	if err != nil {
		return "", err
	}
	name := filepath.Base(pkg)
	dir := filepath.Join(root, "staged", name)
	bin := filepath.Join(dir, name)
	if err := testbin.IntoE(pkg, bin, testbin.Flags("-trimpath"), testbin.LDFlags("-s -w")); err != nil {
		return "", err
	}
	_ = os.Chmod(filepath.Dir(dir), 0o755)
	data, err := os.ReadFile(filepath.Join(testbin.Root(), pkg, "plugin.yaml"))
	if err != nil {
		return "", err
	}
	sum, err := manifests.FileSHA256(bin)
	if err != nil {
		return "", err
	}
	stamped, err := manifests.StampSHA256(data, sum)
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "plugin.yaml"), stamped, 0o644)
}

// Env is a running kernel with builtin plugins installed.
type Env struct {
	Kernel    *kernel.Kernel
	Home      string
	Workspace string
}

// Options tune Start.
type Options struct {
	// Sandbox is the L2 runtime (default docker).
	Sandbox string
	// Logger defaults to warnings on stderr.
	Logger hclog.Logger
	// Spec, when set, adjusts each plugin's spec before the supervisor
	// gets it (the config JSON a provider receives at Configure, the
	// hosts its proxy allows), as the kernel's wiring would.
	Spec func(spec *supervisor.Spec)
	// HostGoCache is the kernel's FLUFFY_HOST_GOCACHE: the host Go build
	// cache sandboxes read under the project's ("off": none; "": the
	// host's `go env GOCACHE`).
	HostGoCache string
	// PythonVenv is the kernel's test.python_venv.
	PythonVenv string
}

// Start opens a kernel on workspace with the docker sandbox and installs
// the builtin plugins (repository-relative package dirs). Without Docker it
// skips the test, unless FLUFFY_REQUIRE_DOCKER is set.
func Start(tb testing.TB, workspace string, o Options, plugins ...string) *Env {
	tb.Helper()
	// Unix socket paths are limited to 108 bytes: a short home under /tmp.
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		tb.Fatal(err)
	}
	_ = os.Chmod(home, 0o755)
	tb.Cleanup(func() { os.RemoveAll(home) })
	adapter := Build(tb, "builtin-plugins/runtime-docker")
	env := map[string]string{"FLUFFY_RUNTIME_ADAPTER": adapter, "DOCKER_HOST": os.Getenv("DOCKER_HOST"), "FLUFFY_HOST_GOCACHE": o.HostGoCache}
	if o.Logger == nil {
		o.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})
	}
	ctx := context.Background()
	var dirs []string
	for _, p := range plugins {
		dirs = append(dirs, Stage(tb, p))
	}
	tb.Logf("opening kernel home=%s ws=%s", home, workspace)
	k, err := kernel.Open(ctx, kernel.Options{Home: home, Workspace: workspace, Sandbox: o.Sandbox, PythonVenv: o.PythonVenv,
		Getenv: func(k string) string { return env[k] }, Logger: o.Logger})
	if err != nil {
		if uerr.HasCode(err, "RUNTIME_UNREACHABLE") && os.Getenv("FLUFFY_REQUIRE_DOCKER") == "" {
			tb.Skipf("Docker is not available: %v", err)
		}
		tb.Fatal(err)
	}
	tb.Cleanup(k.Close)
	for _, d := range dirs {
		if _, err := k.Registry.Install(ctx, d, registry.InstallOptions{BuiltinDirs: dirs}); err != nil {
			tb.Fatal(err)
		}
		spec, err := k.Registry.Runnable(filepath.Base(d))
		if err != nil {
			tb.Fatal(err)
		}
		if o.Spec != nil {
			o.Spec(&spec)
		}
		if err := k.Plugins.Add(spec); err != nil {
			tb.Fatal(err)
		}
	}
	return &Env{Kernel: k, Home: home, Workspace: workspace}
}

// StartProvider is Start for one provider plugin (a repository-relative
// package dir) on a fresh empty workspace: the plugin receives configJSON
// at Configure and its proxy allows exactly hosts (host:port), as the
// kernel's wiring would do for a configured provider.
func StartProvider(tb testing.TB, plugin string, configJSON []byte, hosts ...string) *Env {
	tb.Helper()
	ws, err := os.MkdirTemp("", "fws")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(ws) })
	_ = os.Chmod(ws, 0o755)
	return Start(tb, ws, Options{Spec: func(s *supervisor.Spec) {
		s.ConfigJSON = configJSON
		s.Network = hosts
	}}, plugin)
}

// Provider runs f with the dispensed client of provider plugin name,
// through the kernel's supervisor (started in its sandbox if needed).
func (e *Env) Provider(ctx context.Context, name string, f func(ctx context.Context, c provider.Client) error) error {
	return e.Kernel.Plugins.Use(ctx, name, base.KindProvider, func(ctx context.Context, raw any) error {
		c, ok := raw.(provider.Client)
		if !ok {
			return fmt.Errorf("plugin %s: dispensed %T, not a provider client", name, raw)
		}
		return f(ctx, c)
	})
}

// Call runs one tool call through the kernel's supervisor; a transport
// error fails the test.
func (e *Env) Call(tb testing.TB, plugin, toolName, opID, args string) tool.Result {
	tb.Helper()
	r, err := e.Kernel.Plugins.CallTool(context.Background(), plugin, tool.Call{ID: opID, OperationID: opID, Tool: toolName, Args: json.RawMessage(args)}, nil)
	if err != nil {
		tb.Fatalf("%s %s: %v", plugin, toolName, err)
	}
	return r
}

// OutDir is the host directory of the running instance's /out.
func (e *Env) OutDir(tb testing.TB, plugin string) string {
	tb.Helper()
	st, err := e.Kernel.Plugins.Stats(plugin)
	if err != nil || st.InstanceID == "" {
		tb.Fatalf("plugin %s is not running: %v", plugin, err)
	}
	return filepath.Join(e.Workspace, ".fluffy", "out", st.InstanceID)
}

// String describes the environment for failure messages.
func (e *Env) String() string {
	return fmt.Sprintf("kernel home %s, workspace %s", e.Home, e.Workspace)
}
