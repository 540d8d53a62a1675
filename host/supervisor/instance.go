package supervisor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/kernel"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// baseClient is the part of every kind's client the supervisor uses.
type baseClient interface {
	APIVersion() int
	Info(ctx context.Context) (base.Info, error)
	Configure(ctx context.Context, cfg base.Config, kernel base.KernelServer) error
	Health(ctx context.Context) error
}

// Instance is one running plugin process.
type Instance struct {
	ID      string
	Spec    Spec
	Version int // negotiated API version
	// Raw is the dispensed kind client (tool.Client, ...).
	Raw      any
	Launched sandbox.Launched
	// OutDir is the host directory mounted as the instance's output
	// directory.
	OutDir string

	client *plugin.Client
	base   baseClient
	stderr *tailBuffer
	once   sync.Once
}

// peer is the instance's process or container identity.
func (i *Instance) peer() Peer {
	var p Peer
	if rc := i.client.ReattachConfig(); rc != nil {
		p.PID = rc.Pid
	}
	if i.Launched.Status != nil {
		p.ContainerID = i.Launched.Status().ContainerID
	}
	return p
}

func (i *Instance) stop() {
	i.once.Do(func() {
		i.client.Kill()
		if i.Launched.Cleanup != nil {
			i.Launched.Cleanup()
		}
	})
}

// start launches, negotiates, verifies and configures one instance.
func (s *Supervisor) start(ctx context.Context, spec Spec) (*Instance, error) {
	// A binary just written into the store can be held open for writing
	// by a child process another goroutine is forking at that moment (it
	// inherits the descriptor until its own exec), and exec then fails
	// with ETXTBSY. The window is a fork's length: retry a few times.
	for attempt := 0; ; attempt++ {
		inst, err := s.startOnce(ctx, spec)
		if err == nil || attempt == 4 || !textBusy(err) || ctx.Err() != nil {
			return inst, err
		}
		s.log.Debug("plugin binary busy at exec; retrying", "plugin", spec.Name, "attempt", attempt+1)
		time.Sleep(time.Duration(20*(attempt+1)) * time.Millisecond)
	}
}

// textBusy reports an exec refused because the file was open for writing.
func textBusy(err error) bool {
	return errors.Is(err, syscall.ETXTBSY) || strings.Contains(err.Error(), "text file busy")
}

func (s *Supervisor) startOnce(ctx context.Context, spec Spec) (*Instance, error) {
	sets, ok := pluginSets(spec.Kind)
	if !ok {
		return nil, fmt.Errorf("no shim for kind %q", spec.Kind)
	}
	if _, err := decodeSum(spec.SHA256); err != nil {
		return nil, uerr.Wrap(err, CodeChecksum, fmt.Sprintf("plugin %s has no usable checksum", spec.Name), err.Error(), "reinstall the plugin so the registry records its binary's sha256")
	}
	if s.opts.Admission != nil {
		if err := s.opts.Admission.AdmitStart(ctx, spec); err != nil {
			return nil, err
		}
	}
	id := spec.Name + "-" + randomID()
	out, err := s.outDir(id)
	if err != nil {
		return nil, err
	}
	workspace := s.opts.Workspace
	if s.opts.Views != nil {
		if workspace, err = s.opts.Views.View(ctx, spec); err != nil {
			return nil, err
		}
	}
	// What runs is the bytes checked: a copy hashed while it was written
	// into the kernel's binary store, compared with the registry's sum.
	// The launcher runs that copy; the store binary is never executed or
	// mounted, so swapping it after the check changes nothing.
	bins, err := s.binaries()
	if err != nil {
		return nil, err
	}
	bin, err := bins.Materialize(spec.Name, spec.Binary, spec.SHA256)
	if err != nil {
		return nil, err
	}
	tail := newTailBuffer(8 << 10)
	// No go-plugin SecureConfig: it hashes cfg.Cmd.Path (bwrap itself for a
	// jail, nothing for a container) and reads the file a second time after
	// the check; the verified copy above is the whole checksum contract.
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  base.Handshake(),
		VersionedPlugins: sets,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     s.opts.StartTimeout,
		Logger:           newPluginLogger(s.log.Named(spec.Name)),
		Stderr:           tail,
		GRPCDialOptions:  base.DialOptions(s.opts.MaxRecvBytes),
	}
	ls := sandbox.LaunchSpec{
		Name: spec.Name, Version: spec.Version, Kind: string(spec.Kind), Binary: bin, Verified: true, EntryName: filepath.Base(spec.Binary),
		Template: spec.Template, Limits: spec.Limits, Workspace: workspace, OutDir: out,
		SessionID: s.opts.SessionID, InstanceID: id, KernelID: s.opts.KernelID, Network: spec.Network,
		SHA256: spec.SHA256,
	}
	if err := s.codeMounts(spec, &ls); err != nil {
		return nil, err
	}
	launched, err := s.opts.Launcher.Prepare(ctx, ls, cfg)
	if err != nil {
		if _, ok := uerr.As(err); ok {
			return nil, err
		}
		return nil, uerr.Wrap(err, "PLUGIN_LAUNCH_FAILED", fmt.Sprintf("could not launch plugin %s", spec.Name), err.Error(), "check that the sandbox runtime is available (`fluffy sandbox ls`)")
	}
	cfg.SecureConfig = nil // see above: a launcher may not bring its own
	inst := &Instance{ID: id, Spec: spec, Launched: launched, OutDir: out, stderr: tail, client: plugin.NewClient(cfg)}
	fail := func(err error) (*Instance, error) {
		inst.stop()
		return nil, err
	}
	rpc, err := inst.client.Client()
	if err != nil {
		return fail(s.startError(spec, tail, err))
	}
	inst.Version = inst.client.NegotiatedVersion()
	raw, err := rpc.Dispense(string(spec.Kind))
	if err != nil {
		return fail(fmt.Errorf("dispense %s: %w", spec.Name, err))
	}
	bc, ok := raw.(baseClient)
	if !ok {
		return fail(fmt.Errorf("shim for kind %s does not implement the base client", spec.Kind))
	}
	inst.Raw, inst.base = raw, bc
	sctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	info, err := bc.Info(sctx)
	if err != nil {
		return fail(uerr.Wrap(err, CodeHandshakeFailed, fmt.Sprintf("plugin %s did not describe itself", spec.Name), err.Error(), "the plugin must serve the Base service; rebuild it with pluginsdk"))
	}
	if err := checkInfo(spec, info, inst.Version); err != nil {
		return fail(err)
	}
	var ks base.KernelServer
	if s.opts.KernelService != nil {
		ks = kernel.Server(s.opts.KernelService(id, spec, inst.peer))
	}
	if err := bc.Configure(sctx, base.Config{
		ConfigJSON: spec.ConfigJSON, SessionID: s.opts.SessionID, InstanceID: id,
		Workspace: launched.Workspace, OutDir: launched.OutDir, SessionMode: s.opts.SessionMode,
	}, ks); err != nil {
		return fail(uerr.Wrap(err, CodeHandshakeFailed, fmt.Sprintf("plugin %s refused its configuration", spec.Name), err.Error(), "see the plugin's log for the reason"))
	}
	s.log.Debug("plugin ready", "plugin", spec.Name, "instance", id, "api_version", inst.Version)
	return inst, nil
}

// codeMounts gives a plugin the toolchains and the build cache it declared
// a need for. The cache goes to core plugins only: whatever writes it
// decides what later builds link, so a third-party plugin must not.
func (s *Supervisor) codeMounts(spec Spec, ls *sandbox.LaunchSpec) error {
	if slices.Contains(spec.Capabilities, sandbox.CapToolchain) && s.opts.Toolchains != nil {
		tcs, err := s.opts.Toolchains()
		if err != nil {
			return err
		}
		ls.Toolchains = tcs
	}
	if len(spec.ReadOnly) > 0 {
		ls.Toolchains = append(slices.Clone(ls.Toolchains), spec.ReadOnly...)
	}
	if slices.Contains(spec.Capabilities, sandbox.CapBuildCache) && slices.Contains(spec.Tags, "core_plugin") {
		ls.BuildCache = s.opts.BuildCache
		if s.opts.HostGoCache != nil && ls.BuildCache != "" {
			ls.HostGoCache = s.opts.HostGoCache()
		}
	}
	return nil
}

// checkInfo catches a plugin whose self-description contradicts its manifest.
func checkInfo(spec Spec, info base.Info, negotiated int) error {
	var problems []string
	if info.Name != spec.manifestName() {
		problems = append(problems, fmt.Sprintf("name %q (manifest: %q)", info.Name, spec.manifestName()))
	}
	if info.Kind != spec.Kind {
		problems = append(problems, fmt.Sprintf("kind %q (manifest: %q)", info.Kind, spec.Kind))
	}
	if info.Version != spec.Version {
		problems = append(problems, fmt.Sprintf("version %q (manifest: %q)", info.Version, spec.Version))
	}
	if !info.Speaks(negotiated) {
		problems = append(problems, fmt.Sprintf("API versions %v do not include the negotiated %d", info.APIVersions, negotiated))
	}
	if len(problems) == 0 {
		return nil
	}
	return uerr.New(CodeInfoMismatch, fmt.Sprintf("plugin %s does not match its manifest", spec.Name),
		"the running plugin reports "+strings.Join(problems, "; "),
		"rebuild the plugin and its plugin.yaml together, then reinstall it")
}

// startError maps go-plugin's start failures (plain strings) to typed errors.
func (s *Supervisor) startError(spec Spec, tail *tailBuffer, err error) error {
	msg := err.Error()
	last := summarizeOutput(tail.String())
	withOutput := func(why string) string {
		if last != "" {
			return why + "; plugin output: " + last
		}
		return why
	}
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return uerr.Wrap(err, CodeChecksum, fmt.Sprintf("plugin %s's binary does not match its manifest checksum", spec.Name),
			"the sha256 of "+spec.Binary+" differs from the manifest's; it was not executed",
			"reinstall the plugin from a trusted source (`fluffy plugin install PATH`)")
	case strings.Contains(strings.ToLower(msg), "incompatible api version"):
		pv := parsePluginVersion(msg)
		return &APIVersionError{Plugin: spec.Name, PluginVersions: pv, KernelMin: base.APIVersionMin, KernelMax: base.APIVersionMax, AtHandshake: true}
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return uerr.Wrap(err, CodeStartTimeout, fmt.Sprintf("plugin %s did not complete the handshake", spec.Name),
			withOutput(fmt.Sprintf("it started but sent no handshake within %s", s.opts.StartTimeout)),
			"make sure the plugin's main calls pluginsdk.Serve*; raise the start timeout if it is merely slow")
	case strings.Contains(msg, "Failed to read any lines from plugin's stdout"):
		return uerr.Wrap(err, CodeHandshakeFailed, fmt.Sprintf("plugin %s exited during the handshake", spec.Name),
			withOutput("the process ended without writing a handshake line"),
			"build the plugin with pluginsdk from this fluffy release, and check it runs: see its output above")
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		return uerr.Wrap(err, CodeHandshakeGarbled, fmt.Sprintf("plugin %s wrote to stdout before its handshake", spec.Name),
			"stdout is reserved for the go-plugin handshake line; the first line was not one: "+firstLine(msg),
			"log to stderr (pluginsdk.NewLogger) and never print to stdout")
	case strings.Contains(msg, "plugin exited before we could connect"):
		return uerr.Wrap(err, CodeHandshakeFailed, fmt.Sprintf("plugin %s exited during the handshake", spec.Name),
			withOutput("the process ended before offering a connection (a wrong magic cookie, or a crash at start)"),
			"build the plugin with pluginsdk from this fluffy release, and check it runs: see its output above")
	case strings.Contains(msg, "Cannot connect to the Docker daemon"):
		// The engine, not the plugin: the sandbox could not be created.
		return uerr.Wrap(err, CodeRuntimeUnreachable, fmt.Sprintf("plugin %s could not start: the container engine does not answer", spec.Name), msg,
			"check that the engine runs and answers (`docker info`, and DOCKER_HOST if set), then run the task again: the session keeps its state")
	}
	return uerr.Wrap(err, CodeHandshakeFailed, fmt.Sprintf("plugin %s failed to start", spec.Name), withOutput(msg), "run with FLUFFY_LOG_LEVEL=debug to see the plugin's log")
}

func firstLine(s string) string {
	s = strings.TrimPrefix(s, "Unrecognized remote plugin message: ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// parsePluginVersion extracts "Plugin version: N" from go-plugin's message.
func parsePluginVersion(msg string) []int {
	i := strings.Index(msg, "Plugin version: ")
	if i < 0 {
		return nil
	}
	var v int
	if _, err := fmt.Sscanf(msg[i+len("Plugin version: "):], "%d", &v); err != nil {
		return nil
	}
	return []int{v}
}

// tailBuffer keeps the last n bytes written: enough to explain a crash,
// bounded however much a plugin floods.
type tailBuffer struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.n; over > 0 {
		t.buf = slices.Clone(t.buf[over:])
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// summarizeOutput picks what explains a failure from a plugin's last
// output: the panic or fatal line if there is one, else the last 400
// bytes; escaped (textsafe), since it is the plugin's text.
func summarizeOutput(out string) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "fatal:") {
			return textsafe.Line(l, 400)
		}
	}
	out = strings.TrimSpace(out)
	if len(out) > 400 {
		cut := len(out) - 400
		for cut < len(out) && !utf8.RuneStart(out[cut]) {
			cut++
		}
		out = "…" + out[cut:]
	}
	return textsafe.Line(out, 800)
}
