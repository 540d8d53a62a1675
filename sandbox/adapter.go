package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// LaunchAdapter starts a runtime adapter binary in its jail and returns the
// go-plugin client (Kill it when done) and the runtime client. It is the
// small wiring the kernel and `fluffy sandbox` share; the supervisor may do
// the same through its own launcher path.
func LaunchAdapter(ctx context.Context, j *AdapterJail, binary string, logger hclog.Logger) (*plugin.Client, rt.Client, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  base.Handshake(),
		VersionedPlugins: rt.PluginSets(nil, base.SupportedAPIVersions()),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger,
		StartTimeout:     30 * time.Second,
		GRPCDialOptions:  base.DialOptions(0),
	}
	ld, err := j.Prepare(ctx, LaunchSpec{Name: "runtime-docker", Kind: "runtime", InstanceID: "adapter", Binary: binary}, cfg)
	if err != nil {
		return nil, nil, err
	}
	pc := plugin.NewClient(cfg)
	rpc, err := pc.Client()
	if err != nil {
		pc.Kill()
		ld.Cleanup()
		return nil, nil, fmt.Errorf("start runtime adapter %s: %w", binary, err)
	}
	raw, err := rpc.Dispense(rt.PluginName)
	if err != nil {
		pc.Kill()
		ld.Cleanup()
		return nil, nil, fmt.Errorf("runtime adapter %s: %w", binary, err)
	}
	return pc, raw.(rt.Client), nil
}

// EngineSocketFromEnv returns the unix socket path DOCKER_HOST names, or the
// default /var/run/docker.sock ("" for non-unix hosts).
func EngineSocketFromEnv(getenv func(string) string) string {
	h := getenv("DOCKER_HOST")
	if h == "" {
		return "/var/run/docker.sock"
	}
	if p, ok := strings.CutPrefix(h, "unix://"); ok {
		return p
	}
	return ""
}

// FindAdapter locates the runtime-docker binary: $FLUFFY_RUNTIME_ADAPTER,
// then beside the fluffy executable (bin/plugins/runtime-docker/), then
// beside the fluffy on PATH, then the plugin store under home.
func FindAdapter(getenv func(string) string, home string) (string, error) {
	var cands []string
	if p := getenv("FLUFFY_RUNTIME_ADAPTER"); p != "" {
		cands = append(cands, p)
	}
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(exe), "plugins", "runtime-docker", "runtime-docker"))
	}
	// Beside the fluffy on PATH: how a plugin author's `go test` (whose
	// executable is a test binary) finds the installed adapter.
	if fl, err := exec.LookPath("fluffy"); err == nil {
		if real, err := filepath.EvalSymlinks(fl); err == nil {
			fl = real
		}
		cands = append(cands, filepath.Join(filepath.Dir(fl), "plugins", "runtime-docker", "runtime-docker"))
	}
	if m, _ := filepath.Glob(filepath.Join(home, "plugins", "runtime-docker", "*", "runtime-docker")); len(m) > 0 {
		cands = append(cands, m[len(m)-1])
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("runtime-docker adapter not found (looked in %v); build it with `make build` or set FLUFFY_RUNTIME_ADAPTER", cands)
}
