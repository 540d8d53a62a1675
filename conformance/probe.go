package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/conformance/fakes"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/policyext"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// probe is the state of one run: the plugin under test, its private
// supervisor, the scratch directories and what was captured.
type probe struct {
	r            *Runner
	manifestPath string
	m            *manifests.Manifest
	loadErr      error
	sumErr       error

	dir     string // temp root, removed by close
	ws      string // scratch workspace
	outRoot string // output root for the plugin's instances
	outside string // a directory beside the workspace holding the canary
	canary  string // secret content that must never leak
	wsSnap  map[string]string

	configJSON  []byte
	cap         *capture
	sup         *supervisor.Supervisor
	startOnce   sync.Once
	startErr    error
	startTook   time.Duration
	negotiated  int
	sbx         *supervisor.Supervisor
	sbxErr      error
	sbxRec      *recorder // the L2 launcher, remembering its containers
	lastRaw     sandbox.Launched
	engineState // the suite's own engine view (engineview.go)

	// tool profile state
	outputSizes []int
	toolCalls   int
	oversized   []string

	fake        *fakes.Server
	network     []string // hosts the plugin's sandbox proxy allows
	proxyEnv    []string // FLUFFY_PROXY_SOCKET for a plugin run as a plain process
	netMu       sync.Mutex
	tunnels     int      // tunnels to the fake the proxies opened for the plugin
	refused     []string // requests the proxies refused
	vcsSetupErr error

	// runtime profile state
	adapterL supervisor.Launcher // runtime plugins start through this
	rts      *rtState

	closers []func()
}

// setupDirs makes the scratch workspace (with fixture files, a large file
// and a symlink that leads outside), the output root and the canary.
func (p *probe) setupDirs() error {
	p.ws = filepath.Join(p.dir, "workspace")
	p.outRoot = filepath.Join(p.dir, "out")
	p.outside = filepath.Join(p.dir, "outside")
	var b [16]byte
	_, _ = rand.Read(b[:])
	p.canary = "FLUFFY-CANARY-" + hex.EncodeToString(b[:])
	for _, d := range []string{p.ws, p.outRoot, p.outside, filepath.Join(p.ws, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"README.md":   "hello\nworld\n",
		"src/main.go": "package main\n\nfunc main() {}\n",
		"big.txt":     string(bytes.Repeat([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n"), 48<<10)), // 3 MiB
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(p.ws, filepath.FromSlash(name)), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(p.outside, "secret.txt"), []byte(p.canary+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Symlink(p.outside, filepath.Join(p.ws, "escape-link")); err != nil {
		return err
	}
	snap, err := snapshot(p.ws)
	if err != nil {
		return err
	}
	p.wsSnap = snap
	return nil
}

func (p *probe) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
	if p.sup != nil {
		p.sup.Close()
	}
	_ = os.RemoveAll(p.dir)
}

func (p *probe) onClose(f func()) { p.closers = append(p.closers, f) }

// launcher is how the plugin under test starts for every item but the
// sandbox-fitness ones: the runtime jail for runtime adapters (the way the
// kernel starts them), Options.Launcher for every other kind.
func (p *probe) launcher() supervisor.Launcher {
	if p.adapterL != nil {
		return p.adapterL
	}
	return p.r.opts.Launcher
}

// ensureStarted starts the plugin once through the private supervisor.
func (p *probe) ensureStarted() error {
	p.startOnce.Do(func() {
		p.cap = &capture{inner: p.launcher(), extraEnv: append([]string{"FLUFFY_PLUGIN_LOG_LEVEL=trace"}, p.proxyEnv...)}
		sup, err := p.newSupervisor(p.cap, p.outRoot)
		if err != nil {
			p.startErr = err
			return
		}
		p.sup = sup
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), p.r.opts.StartTimeout+5*time.Second)
		defer cancel()
		p.startErr = sup.Use(ctx, p.m.Name, base.Kind(p.m.Kind), func(context.Context, any) error { return nil })
		p.startTook = time.Since(t0)
		if p.startErr == nil {
			st, _ := sup.Stats(p.m.Name)
			p.negotiated = st.APIVersion
		}
	})
	return p.startErr
}

// use runs f with the running plugin's kind client.
func (p *probe) use(ctx context.Context, f func(ctx context.Context, client any) error) error {
	return p.sup.Use(ctx, p.m.Name, base.Kind(p.m.Kind), f)
}

// capture wraps a launcher and records everything the plugin writes.
type capture struct {
	inner    supervisor.Launcher
	extraEnv []string

	mu         sync.Mutex
	stderr     bytes.Buffer // raw stderr lines (before and after Serve)
	syncStdout bytes.Buffer // stdout after the handshake (go-plugin's stdio stream)
	syncStderr bytes.Buffer
	cmds       []*exec.Cmd
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (c *capture) Prepare(ctx context.Context, spec sandbox.LaunchSpec, cfg *plugin.ClientConfig) (sandbox.Launched, error) {
	l, err := c.inner.Prepare(ctx, spec, cfg)
	if err != nil {
		return l, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cfg.Cmd != nil {
		cfg.Cmd.Env = append(cfg.Cmd.Env, c.extraEnv...)
		c.cmds = append(c.cmds, cfg.Cmd)
	}
	var w io.Writer = lockedWriter{&c.mu, &c.stderr}
	if cfg.Stderr != nil {
		w = io.MultiWriter(cfg.Stderr, w)
	}
	cfg.Stderr = w
	cfg.SyncStdout = lockedWriter{&c.mu, &c.syncStdout}
	cfg.SyncStderr = lockedWriter{&c.mu, &c.syncStderr}
	return l, nil
}

func (c *capture) snapshot() (stderr, syncStdout, syncStderr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String(), c.syncStdout.String(), c.syncStderr.String()
}

// kindSets is the kernel-side version map for the plugin's kind, offering
// exactly versions. A version the kernel has no shim for gets the newest
// shim, so a handshake can still be attempted (and refused).
func kindSets(kind string, versions []int) map[int]plugin.PluginSet {
	all := base.SupportedAPIVersions()
	var sets map[int]plugin.PluginSet
	switch base.Kind(kind) {
	case base.KindTool:
		sets = tool.PluginSets(nil, all)
	case base.KindProvider:
		sets = provider.PluginSets(nil, all)
	case base.KindVCS:
		sets = vcs.PluginSets(nil, all)
	case base.KindPolicy:
		sets = policyext.PluginSets(nil, all)
	case base.KindRuntime:
		sets = rt.PluginSets(nil, all)
	default:
		return nil
	}
	out := map[int]plugin.PluginSet{}
	for _, v := range versions {
		if s, ok := sets[v]; ok {
			out[v] = s
		} else {
			out[v] = sets[base.APIVersionMax]
		}
	}
	return out
}

// rawStart launches the plugin outside the supervisor, offering versions,
// through launcher (with capture). The caller kills the client.
func (p *probe) rawStart(ctx context.Context, l supervisor.Launcher, versions []int, env []string) (*plugin.Client, *capture, error) {
	sets := kindSets(p.m.Kind, versions)
	if sets == nil {
		return nil, nil, fmt.Errorf("the suite has no protocol shim for kind %q", p.m.Kind)
	}
	sum, _ := hex.DecodeString(p.m.SHA256)
	cap := &capture{inner: l, extraEnv: env}
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  base.Handshake(),
		VersionedPlugins: sets,
		SecureConfig:     &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     p.r.opts.StartTimeout,
		// Refusals and kills are what these starts provoke; their warnings
		// would only be noise.
		Logger: hclog.NewNullLogger(),
	}
	// Unique at its start: container names keep only a short instance id.
	var rb [5]byte
	_, _ = rand.Read(rb[:])
	raw := "r" + hex.EncodeToString(rb[:])
	out := filepath.Join(p.outRoot, raw)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, nil, err
	}
	launched, err := cap.Prepare(ctx, sandbox.LaunchSpec{
		Name: p.m.Name, Version: p.m.Version, Kind: p.m.Kind, Binary: p.m.EntryPath(),
		Template: p.m.Sandbox.Template, Workspace: p.ws, OutDir: out,
		SessionID: "conformance", InstanceID: p.m.Name + "-" + raw, KernelID: "conformance-" + filepath.Base(p.dir),
		SHA256: p.m.SHA256,
	}, cfg)
	if err != nil {
		return nil, nil, err
	}
	p.lastRaw = launched
	if cfg.RunnerFunc != nil {
		cfg.SecureConfig = nil // the launcher verified LaunchSpec.SHA256 itself
	}
	c := plugin.NewClient(cfg)
	p.onClose(func() {
		c.Kill()
		if launched.Cleanup != nil {
			launched.Cleanup()
		}
	})
	return c, cap, nil
}

// snapshot hashes every file under root (symlinks by target, not content).
func snapshot(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(path)
			if err != nil {
				return err
			}
			out[rel] = "link:" + t
		case d.IsDir():
			out[rel+"/"] = "dir"
		default:
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			out[rel] = hex.EncodeToString(h[:])
		}
		return nil
	})
	return out, err
}
