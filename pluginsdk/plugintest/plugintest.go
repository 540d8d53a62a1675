package plugintest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// Env is the workspace and output directory a test plugin is configured with.
type Env struct {
	Workspace string
	OutDir    string
}

// NewEnv makes a fresh workspace and output directory under t.TempDir and
// writes files (path → content) into the workspace.
func NewEnv(t testing.TB, files map[string]string) Env {
	t.Helper()
	dir := t.TempDir()
	e := Env{Workspace: filepath.Join(dir, "workspace"), OutDir: filepath.Join(dir, "out")}
	for _, d := range []string{e.Workspace, e.OutDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range files {
		full := filepath.Join(e.Workspace, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// InProcessTool serves impl over an in-memory gRPC connection using the
// shim of the given API version, configures it with env, and returns the
// kernel-side client.
func InProcessTool(t testing.TB, impl tool.Plugin, version int, env Env) tool.Client {
	t.Helper()
	sets := tool.PluginSets(impl, []int{version})
	set, ok := sets[version]
	if !ok {
		t.Fatalf("plugintest: tool API version %d does not exist", version)
	}
	client, _ := plugin.TestPluginGRPCConn(t, false, set)
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(tool.PluginName)
	if err != nil {
		t.Fatalf("dispense: %v", err)
	}
	tc := raw.(tool.Client)
	configure(t, tc, env)
	return tc
}

func configure(t testing.TB, tc tool.Client, env Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tc.Configure(ctx, base.Config{SessionID: "test", InstanceID: "test-1", Workspace: env.Workspace, OutDir: env.OutDir, SessionMode: "strict"}, nil); err != nil {
		t.Fatalf("configure: %v", err)
	}
}

// Build compiles the Go main package at pkg (an import path or a ./path
// relative to the caller's module) into a temporary directory and returns
// the binary's path. The build is static (CGO_ENABLED=0), like `make build`.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	name := filepath.Base(strings.TrimSuffix(pkg, "/"))
	if name == "." || name == ".." || name == "/" {
		name = "plugin"
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return testbin.Into(t, pkg, filepath.Join(t.TempDir(), name), testbin.In(wd))
}

// Binary is a plugin binary launched through go-plugin.
type Binary struct {
	Client *plugin.Client
	Tool   tool.Client
	// Version is the negotiated API version.
	Version int
}

// StartTool launches the tool plugin binary at path the way the kernel does
// (offering API versions `versions`, default all), configures it with env,
// and stops it when the test ends.
func StartTool(t testing.TB, path string, env Env, versions ...int) *Binary {
	t.Helper()
	if len(versions) == 0 {
		versions = base.SupportedAPIVersions()
	}
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake(),
		VersionedPlugins: tool.PluginSets(nil, versions),
		Cmd:              exec.Command(path),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "plugintest", Output: os.Stderr, Level: hclog.Warn}),
		StartTimeout:     10 * time.Second,
	})
	t.Cleanup(c.Kill)
	rpc, err := c.Client()
	if err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	raw, err := rpc.Dispense(tool.PluginName)
	if err != nil {
		t.Fatalf("dispense %s: %v", path, err)
	}
	tc := raw.(tool.Client)
	configure(t, tc, env)
	return &Binary{Client: c, Tool: tc, Version: c.NegotiatedVersion()}
}
