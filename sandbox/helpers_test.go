package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// fixtures shared by the package's tests (built once in TestMain).
type testEnv struct {
	dir        string // scratch root
	hostile    string // fixture plugin binary
	adapter    string // runtime-docker binary
	dockerErr  error  // why Docker is unusable (nil: usable)
	runDir     string
	lease      *Lease
	rtClient   *plugin.Client
	rt         rt.Client
	containers *Containers
}

var tenv testEnv

func TestMain(m *testing.M) {
	if os.Getenv(envHelperKernel) != "" {
		helperKernel()
		return
	}
	if os.Getenv(envHelperNonRoot) != "" {
		helperNonRoot()
		return
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fluffy-sandbox-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755)
	tenv.dir = dir
	tenv.hostile = filepath.Join(dir, "bin", "hostile")
	tenv.adapter = filepath.Join(dir, "bin", "runtime-docker")
	for out, pkg := range map[string]string{tenv.hostile: "internal/fixtures/tool-hostile", tenv.adapter: "builtin-plugins/runtime-docker"} {
		if err := testbin.IntoE(pkg, out); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	_ = os.Chmod(filepath.Join(dir, "bin"), 0o755)
	tenv.runDir = filepath.Join(dir, "run")
	tenv.lease, err = AcquireLease(tenv.runDir, NewKernelID())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer tenv.lease.Release()
	tenv.dockerErr = setupDocker()
	code := m.Run()
	if tenv.containers != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		left, _ := tenv.rt.List(ctx, map[string]string{LabelKernel: tenv.lease.KernelID}, true)
		for _, c := range left {
			fmt.Fprintf(os.Stderr, "container left behind by tests: %s (%s)\n", c.Name, c.Status)
			_ = tenv.rt.Remove(ctx, c.ID, true, true)
			code = 1
		}
		cancel()
	}
	if tenv.rtClient != nil {
		tenv.rtClient.Kill()
	}
	return code
}

func setupDocker() error {
	if _, err := os.Stat("/var/run/docker.sock"); err != nil && os.Getenv("DOCKER_HOST") == "" {
		return fmt.Errorf("no docker socket: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc, c, err := launchRuntime(ctx, tenv.lease, tenv.adapter, "")
	if err != nil {
		return err
	}
	tenv.rtClient, tenv.rt = pc, c
	tenv.containers, err = NewContainers(ctx, ContainersConfig{Runtime: c, Lease: tenv.lease})
	return err
}

// launchRuntime starts runtime-docker in its bubblewrap jail.
func launchRuntime(ctx context.Context, lease *Lease, bin, sock string) (*plugin.Client, rt.Client, error) {
	return LaunchAdapter(ctx, &AdapterJail{Lease: lease, EngineSocket: sock, Require: os.Getenv(EnvRequireJail) != ""}, bin, nil)
}

// needDocker skips only when Docker is truly absent and not required.
func needDocker(t testing.TB) {
	t.Helper()
	if tenv.dockerErr == nil {
		return
	}
	if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
		t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but Docker is unusable: %v", tenv.dockerErr)
	}
	t.Skipf("Docker is not available: %v", tenv.dockerErr)
}

type launcher interface {
	Prepare(ctx context.Context, spec LaunchSpec, cfg *plugin.ClientConfig) (Launched, error)
}

// running is one launched fixture plugin.
type running struct {
	client   *plugin.Client
	tool     tool.Client
	launched Launched
	spec     LaunchSpec
}

func (r *running) stop() {
	r.client.Kill()
	if r.launched.Cleanup != nil {
		r.launched.Cleanup()
	}
}

var instanceSeq atomic.Int64

// newSpec is a LaunchSpec for the hostile fixture with a fresh workspace
// and output directory.
func newSpec(t testing.TB, template string) LaunchSpec {
	t.Helper()
	ws := t.TempDir()
	_ = os.Chmod(ws, 0o755)
	if err := os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return LaunchSpec{
		Name: "hostile", Version: "0.0.1", Kind: "tool", Binary: tenv.hostile, Template: template,
		Workspace: ws, OutDir: filepath.Join(t.TempDir(), "out"),
		SessionID: "s-test", InstanceID: fmt.Sprintf("i%d-%d", os.Getpid(), instanceSeq.Add(1)),
	}
}

func launch(t testing.TB, l launcher, spec LaunchSpec) *running {
	t.Helper()
	r, err := launchErr(l, spec)
	if err != nil {
		t.Fatalf("launch %s: %v", spec.Name, err)
	}
	t.Cleanup(r.stop)
	return r
}

func launchErr(l launcher, spec LaunchSpec) (*running, error) {
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  base.Handshake(),
		VersionedPlugins: tool.PluginSets(nil, base.SupportedAPIVersions()),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.NewNullLogger(),
		StartTimeout:     30 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ld, err := l.Prepare(ctx, spec, cfg)
	if err != nil {
		return nil, err
	}
	pc := plugin.NewClient(cfg)
	rpc, err := pc.Client()
	if err != nil {
		pc.Kill()
		ld.Cleanup()
		return nil, err
	}
	raw, err := rpc.Dispense(tool.PluginName)
	if err != nil {
		pc.Kill()
		ld.Cleanup()
		return nil, err
	}
	tc := raw.(tool.Client)
	if err := tc.Configure(ctx, base.Config{Workspace: ld.Workspace, OutDir: ld.OutDir, InstanceID: spec.InstanceID, SessionID: spec.SessionID}, nil); err != nil {
		pc.Kill()
		ld.Cleanup()
		return nil, err
	}
	return &running{client: pc, tool: tc, launched: ld, spec: spec}, nil
}
