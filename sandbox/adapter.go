package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// LaunchAdapter starts a runtime adapter binary in its jail and returns the
// go-plugin client (Kill it when done) and the runtime client. It is the
// small wiring the kernel and `fluffy sandbox` share.
//
// The adapter is root-equivalent (it holds the engine socket), so it is
// verified like any plugin: the sha256 in the plugin.yaml beside binary
// (what `make build` stamps) is checked while the binary is copied into the
// jail's binary store, and that copy is what runs. Without a plugin.yaml
// (only FLUFFY_RUNTIME_ADAPTER can name such a binary: an operator's or a
// test's explicit choice) the copy is hashed as it is made, logged, and the
// copy runs.
func LaunchAdapter(ctx context.Context, j *AdapterJail, binary string, logger hclog.Logger) (*plugin.Client, rt.Client, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	store := j.Binaries
	if store == nil {
		var err error
		if store, err = OpenBinaryStore(filepath.Join(j.Lease.Dir, "cas")); err != nil {
			return nil, nil, err
		}
	}
	verified, sum, err := verifyAdapter(store, binary)
	if err != nil {
		return nil, nil, err
	}
	logger.Debug("runtime adapter verified", "binary", binary, "sha256", sum, "runs", verified)
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  base.Handshake(),
		VersionedPlugins: rt.PluginSets(nil, base.SupportedAPIVersions()),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           logger,
		StartTimeout:     30 * time.Second,
		GRPCDialOptions:  base.DialOptions(0),
	}
	ld, err := j.Prepare(ctx, LaunchSpec{Name: "runtime-docker", Kind: "runtime", InstanceID: "adapter", Binary: verified, Verified: true, EntryName: "runtime-docker", SHA256: sum}, cfg)
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

// verifyAdapter copies binary into store, checked against the sha256 of the
// plugin.yaml beside it when there is one, and returns the copy and its sum.
func verifyAdapter(store *BinaryStore, binary string) (string, string, error) {
	mpath := filepath.Join(filepath.Dir(binary), manifests.FileName)
	if _, err := os.Stat(mpath); err != nil {
		return store.Adopt("runtime-docker", binary)
	}
	m, err := manifests.Load(mpath)
	if err != nil {
		return "", "", uerr.Wrap(err, "RUNTIME_ADAPTER_INVALID", "the runtime adapter's manifest is not valid", err.Error(),
			"rebuild fluffy and its plugins with `make build`")
	}
	if m.Name != "runtime-docker" || m.Kind != "runtime" || m.EntryPath() != binary {
		return "", "", uerr.New("RUNTIME_ADAPTER_INVALID", "the runtime adapter's manifest does not describe it",
			fmt.Sprintf("%s names %s (%s) with entry %s, not the runtime-docker adapter %s", mpath, m.Name, m.Kind, m.EntryPath(), binary),
			"rebuild fluffy and its plugins with `make build`")
	}
	p, err := store.Materialize(m.Name, binary, m.SHA256)
	return p, strings.ToLower(m.SHA256), err
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

// FindAdapter locates the runtime-docker adapter among fluffy's own
// builtins: $FLUFFY_RUNTIME_ADAPTER (an explicit choice, for tests and
// operators), else bin/plugins/runtime-docker/runtime-docker beside the
// fluffy executable (what `make build` produces). It never looks on PATH
// nor in the plugin store: the adapter holds the engine socket, so it must
// not be whatever binary happens to be found there or whatever was installed
// under its name.
func FindAdapter(getenv func(string) string) (string, error) {
	var cands []string
	if p := getenv("FLUFFY_RUNTIME_ADAPTER"); p != "" {
		cands = append(cands, p)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		cands = append(cands, filepath.Join(filepath.Dir(exe), "plugins", "runtime-docker", "runtime-docker"))
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("runtime-docker adapter not found (looked in %v); build it with `make build` or set FLUFFY_RUNTIME_ADAPTER", cands)
}
