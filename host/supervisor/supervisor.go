package supervisor

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/kernel"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// Launcher fills in how go-plugin starts one plugin process: a plain
// subprocess (sandbox.Subprocess) or an L2 container.
type Launcher interface {
	Prepare(ctx context.Context, spec sandbox.LaunchSpec, cfg *plugin.ClientConfig) (sandbox.Launched, error)
}

// Spec is what the supervisor needs to know about a plugin; the registry
// builds it from the manifest.
type Spec struct {
	Name    string
	Version string
	Kind    base.Kind
	Binary  string // absolute path of the entry binary in the plugin store
	// SHA256 is the registry's recorded hash (hex): the bytes that run are
	// a verified copy of Binary in the kernel's binary store, never Binary
	// itself.
	SHA256      string
	APIVersions []int // from the manifest
	Template    string
	Limits      sandbox.Limits
	Network     []string
	// PerCallTools names tools whose lifetime is per_call: each call gets a
	// fresh instance.
	PerCallTools []string
	ConfigJSON   []byte
	// Tags are the registry's tags (core_plugin, third_party, ...).
	Tags []string
	// Capabilities are the manifest's required_capabilities; the
	// supervisor reads sandbox.toolchain and sandbox.build_cache.
	Capabilities []string
	// Manifest, when set, is the manifest name the binary reports: Name is
	// then one configured instance of that plugin (the MCP bridge runs as
	// mcp-SERVER, one spec per server), started, limited and broken like
	// any plugin under its own name.
	Manifest string
	// ReadOnly are host files or directories mounted read-only at the
	// same path for this spec alone (an MCP server's program), beside the
	// toolchains; only for templates that run code.
	ReadOnly []sandbox.Toolchain
}

// manifestName is the name the running binary must report.
func (s Spec) manifestName() string {
	if s.Manifest != "" {
		return s.Manifest
	}
	return s.Name
}

// Options configure a Supervisor. Zero values get the defaults noted.
type Options struct {
	Logger   hclog.Logger
	Launcher Launcher // default sandbox.Subprocess{}
	// StartTimeout bounds launch to handshake (default 10 s).
	StartTimeout time.Duration
	// CallTimeout bounds one call when the plugin's limits set none (default 5 m).
	CallTimeout time.Duration
	// HealthTimeout bounds one health check (default 2 s).
	HealthTimeout time.Duration
	// HealthInterval, when positive, health-checks every running instance
	// that often in the background; a failing one is killed and restarted on
	// next use.
	HealthInterval time.Duration
	KernelID       string
	SessionID      string
	SessionMode    string
	// Workspace is what every plugin sees read-only as /workspace when
	// Views is nil.
	Workspace string
	// Views, when set, replaces Workspace: it gives each plugin the
	// directory it sees as /workspace (the session's view for that plugin,
	// or "" for none) and brings it up to date. It is asked when an
	// instance starts and again before every use of it.
	Views Views
	// OutRoot holds one output directory per instance (default a temp dir).
	OutRoot string
	// KernelService builds the callback service for one instance; nil: none.
	// peer says what the instance runs as (read at each call: the
	// container id is known once it runs).
	KernelService func(instanceID string, spec Spec, peer func() Peer) kernel.Service
	// Breaker: opens after BreakerThreshold consecutive failures (default 5)
	// for BreakerOpen (default 30 s).
	BreakerThreshold int
	BreakerOpen      time.Duration
	// RestartBackoff returns a fresh backoff policy per plugin (default
	// exponential from 100 ms to 5 s).
	RestartBackoff func() backoff.BackOff
	Now            func() time.Time
	// Observer hears about instance lifecycle events; nil: nobody.
	Observer Observer
	// Toolchains returns the host directories plugins that declare
	// sandbox.toolchain get read-only (the policy's toolchains section,
	// read at every start so a new policy applies to the next one).
	Toolchains func() ([]sandbox.Toolchain, error)
	// BuildCache is the project's build cache directory, mounted writable
	// for core plugins that declare sandbox.build_cache.
	BuildCache string
	// HostGoCache returns the host's Go build cache, mounted read-only
	// beside BuildCache wherever that is mounted (zero: none). Called at
	// each such start; the kernel looks the directory up once.
	HostGoCache func() sandbox.Toolchain
	// MaxRecvBytes bounds one message received from a plugin (default
	// base.MaxPluginMessageBytes); a larger one fails the call with
	// PLUGIN_RESPONSE_TOO_LARGE and is never buffered whole.
	MaxRecvBytes int
	// ProgressInterval is the least time between two progress events
	// passed on for one call (default 100 ms): a flood is coalesced to the
	// latest event per interval, and the last one is always delivered.
	ProgressInterval time.Duration
	// Binaries copies each binary, verified against Spec.SHA256, into the
	// kernel's content-addressed store ($FLUFFY_HOME/cas) and returns the
	// copy the launcher runs. Nil: a private store in a temporary
	// directory, removed by Close.
	Binaries Binaries
	// Admission, when set, is asked before every launch whether the plugin
	// may start in its sandbox (the kernel asks the policy for templates
	// that need an opt-in); an error refuses the start.
	Admission Admission
}

// Binaries is the kernel's binary store (sandbox.BinaryStore): Materialize
// returns the path of a copy of src whose bytes hash to sha256, or an error
// when src's do not.
type Binaries interface {
	Materialize(name, src, sha256 string) (string, error)
}

// Admission decides whether a plugin may be launched at all.
type Admission interface {
	AdmitStart(ctx context.Context, spec Spec) error
}

// Views supplies and refreshes each plugin's /workspace (host/workspace,
// through the kernel).
type Views interface {
	View(ctx context.Context, spec Spec) (dir string, err error)
}

// Event names given to an Observer.
const (
	EventStarted     = "started"
	EventStopped     = "stopped"
	EventFailed      = "failed"
	EventBreakerOpen = "breaker_open"
)

// Peer is the OS-level identity of one instance as the kernel launched it:
// the process id of a plugin run as a plain process (0 in a container,
// whose pid the kernel does not see) and the id of the L2 container it
// runs in ("" without one). Capability tokens are bound to it.
type Peer struct {
	PID         int
	ContainerID string
}

// Observer is told about plugin lifecycle events (the kernel maps them to
// registry states and audit records). It must not block.
type Observer interface {
	PluginEvent(spec Spec, instanceID, event string, err error)
}

// Supervisor runs plugin instances. It is safe for concurrent use.
type Supervisor struct {
	opts Options
	log  hclog.Logger

	mu      sync.Mutex
	plugins map[string]*managed
	closed  bool
	stop    chan struct{}
	done    chan struct{}

	binOnce sync.Once
	bins    Binaries
	binErr  error
	binTmp  string // the private store New made when Options.Binaries is nil
}

// New returns a Supervisor; it starts nothing until a plugin is used.
func New(opts Options) *Supervisor {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Launcher == nil {
		opts.Launcher = sandbox.Subprocess{}
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 5 * time.Minute
	}
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = 2 * time.Second
	}
	if opts.BreakerThreshold <= 0 {
		opts.BreakerThreshold = 5
	}
	if opts.BreakerOpen <= 0 {
		opts.BreakerOpen = 30 * time.Second
	}
	if opts.RestartBackoff == nil {
		opts.RestartBackoff = func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval = 100 * time.Millisecond
			b.MaxInterval = 5 * time.Second
			b.MaxElapsedTime = 0
			return b
		}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SessionMode == "" {
		opts.SessionMode = "strict"
	}
	if opts.KernelID == "" {
		opts.KernelID = randomID()
	}
	s := &Supervisor{opts: opts, log: opts.Logger.Named("supervisor"), plugins: map[string]*managed{}, stop: make(chan struct{}), done: make(chan struct{})}
	if opts.HealthInterval > 0 {
		go s.healthLoop()
	} else {
		close(s.done)
	}
	return s
}

// healthLoop checks running instances until Close.
func (s *Supervisor) healthLoop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		names := make([]string, 0, len(s.plugins))
		for n := range s.plugins {
			names = append(names, n)
		}
		s.mu.Unlock()
		for _, n := range names {
			if err := s.Health(context.Background(), n); err != nil {
				s.log.Warn("plugin failed its health check; it will be restarted on next use", "plugin", n, "error", err)
			}
		}
	}
}

// KernelID identifies this supervisor's kernel instance (labels, reaping).
func (s *Supervisor) KernelID() string { return s.opts.KernelID }

// managed is one plugin's state across restarts.
type managed struct {
	spec Spec

	mu        sync.Mutex // serialises start/stop of the instance
	inst      *Instance
	failures  int // consecutive
	openUntil time.Time
	notBefore time.Time // restart backoff
	backoff   backoff.BackOff
	restarts  int
}

// Add makes a plugin known. The pre-launch API-version check runs here, so
// an incompatible plugin is refused before its binary is ever executed.
func (s *Supervisor) Add(spec Spec) error {
	if err := CheckAPIVersions(spec.Name, spec.APIVersions); err != nil {
		return err
	}
	if _, ok := pluginSets(spec.Kind); !ok {
		return uerr.New(CodeKindUnsupported, fmt.Sprintf("plugin %s has kind %q, which this kernel cannot run", spec.Name, spec.Kind),
			"there is no protocol shim for that kind", "use one of: tool, provider, runtime, vcs, policy")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.plugins[spec.Name]; ok && old.inst != nil {
		old.inst.stop()
	}
	s.plugins[spec.Name] = &managed{spec: spec, backoff: s.opts.RestartBackoff()}
	return nil
}

// Remove stops and forgets a plugin.
func (s *Supervisor) Remove(name string) {
	s.mu.Lock()
	m := s.plugins[name]
	delete(s.plugins, name)
	s.mu.Unlock()
	if m != nil {
		m.mu.Lock()
		if m.inst != nil {
			m.inst.stop()
			s.notify(m.spec, m.inst.ID, EventStopped, nil)
			m.inst = nil
		}
		m.mu.Unlock()
	}
}

func (s *Supervisor) get(name string) (*managed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, uerr.New("KERNEL_SHUTTING_DOWN", "the kernel is shutting down", "no new plugin calls are accepted", "start fluffy again")
	}
	m, ok := s.plugins[name]
	if !ok {
		return nil, uerr.New(CodeUnknownPlugin, fmt.Sprintf("no plugin named %s is loaded", name),
			"it is not installed, not enabled, or was rejected", "run `fluffy plugin list --rejected` to see why")
	}
	return m, nil
}

// Spec returns the spec of a loaded plugin.
func (s *Supervisor) Spec(name string) (Spec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.plugins[name]
	if !ok {
		return Spec{}, false
	}
	return m.spec, true
}

// Names lists the loaded plugins, sorted.
func (s *Supervisor) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.plugins))
	for n := range s.plugins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Stats describe one plugin for status output and tests.
type Stats struct {
	Running     bool
	APIVersion  int
	Restarts    int
	Failures    int
	CircuitOpen bool
	InstanceID  string
}

// Stats reports a plugin's state.
func (s *Supervisor) Stats(name string) (Stats, error) {
	m, err := s.get(name)
	if err != nil {
		return Stats{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Stats{Restarts: m.restarts, Failures: m.failures, CircuitOpen: s.opts.Now().Before(m.openUntil)}
	if m.inst != nil && !m.inst.client.Exited() {
		st.Running, st.APIVersion, st.InstanceID = true, m.inst.Version, m.inst.ID
	}
	return st, nil
}

// acquire returns a running instance, starting one if needed (lazy start).
func (s *Supervisor) acquire(ctx context.Context, m *managed) (*Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := s.opts.Now()
	if now.Before(m.openUntil) {
		return nil, uerr.New(CodeCircuitOpen, fmt.Sprintf("plugin %s is temporarily disabled", m.spec.Name),
			fmt.Sprintf("it failed %d times in a row; the circuit breaker is open until %s", s.opts.BreakerThreshold, m.openUntil.Format(time.TimeOnly)),
			"wait for the breaker to close, or look at the plugin's log (FLUFFY_LOG_LEVEL=debug) for the cause")
	}
	if m.inst != nil && !m.inst.client.Exited() {
		return m.inst, nil
	}
	if m.inst != nil {
		m.inst.stop()
		m.inst = nil
	}
	if wait := m.notBefore.Sub(now); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	inst, err := s.start(ctx, m.spec)
	if err != nil {
		s.failedLocked(m, err)
		return nil, err
	}
	if m.restarts > 0 || m.failures > 0 {
		s.log.Info("plugin restarted", "plugin", m.spec.Name, "restarts", m.restarts)
	}
	m.inst = inst
	s.notify(m.spec, inst.ID, EventStarted, nil)
	return inst, nil
}

func (s *Supervisor) notify(spec Spec, instanceID, event string, err error) {
	if s.opts.Observer != nil {
		s.opts.Observer.PluginEvent(spec, instanceID, event, err)
	}
}

// failedLocked records a failure: backoff before the next start, and the
// breaker opens after the threshold. m.mu must be held.
func (s *Supervisor) failedLocked(m *managed, cause error) {
	m.failures++
	m.restarts++
	m.notBefore = s.opts.Now().Add(m.backoff.NextBackOff())
	s.notify(m.spec, "", EventFailed, cause)
	if m.failures >= s.opts.BreakerThreshold {
		s.notify(m.spec, "", EventBreakerOpen, cause)
		m.openUntil = s.opts.Now().Add(s.opts.BreakerOpen)
		m.failures = 0
		m.backoff.Reset()
		s.log.Error("plugin circuit breaker opened", "plugin", m.spec.Name, "until", m.openUntil, "error", cause)
	}
}

func (s *Supervisor) succeeded(m *managed) {
	m.mu.Lock()
	if m.failures > 0 {
		m.failures = 0
		m.backoff.Reset()
		m.notBefore = time.Time{}
	}
	m.mu.Unlock()
}

// fail handles an error from a call on inst. A transport failure means the
// plugin crashed or hung: its instance is killed and the next use restarts
// it. It returns the error to give the caller.
func (s *Supervisor) fail(m *managed, inst *Instance, callCtx context.Context, err error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out error
	switch {
	case errors.Is(callCtx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded), status.Code(err) == codes.DeadlineExceeded:
		// gRPC's deadline timer can fire a moment before the context's.
		out = uerr.Wrap(err, CodeCallTimeout, fmt.Sprintf("plugin %s did not answer in time", m.spec.Name),
			"the call passed its deadline; the plugin was killed and will be restarted", "retry; if it keeps happening the plugin may hang on this input")
	case status.Code(err) == codes.ResourceExhausted:
		max := s.opts.MaxRecvBytes
		if max <= 0 {
			max = base.MaxPluginMessageBytes
		}
		out = uerr.Wrap(err, CodeResponseTooLarge, fmt.Sprintf("plugin %s sent a message larger than the kernel accepts", m.spec.Name),
			fmt.Sprintf("the kernel reads at most %d bytes per message from a plugin; the message was discarded and the plugin restarted", max),
			"ask for less (a line range, a narrower search), or fix the plugin to page its output")
	case errors.Is(callCtx.Err(), context.Canceled):
		// The caller gave up; the plugin did nothing wrong.
		return fmt.Errorf("call to %s: %w", m.spec.Name, context.Cause(callCtx))
	default:
		cause := err
		why := crashWhy(inst, err)
		exitErr := sandboxExit(inst)
		if exitErr != nil {
			// The sandbox knows why the process died (out of memory, exit code).
			cause = exitErr
			why = uerr.From(exitErr).What + ": " + uerr.From(exitErr).Why
		}
		if uerr.HasCode(exitErr, sandbox.CodeKilledExternally) || uerr.HasCode(exitErr, sandbox.CodeEngineLost) {
			// Not the plugin's doing: say so instead of blaming its author.
			// It still counts toward restarts (the instance is gone).
			out = exitErr
		} else {
			out = uerr.Wrap(cause, CodeCrashed, fmt.Sprintf("plugin %s failed during a call", m.spec.Name),
				why, "the plugin will be restarted on next use; if this repeats, run with FLUFFY_LOG_LEVEL=debug and report it to the plugin's author")
		}
	}
	if m.inst == inst {
		inst.stop()
		m.inst = nil
	}
	s.failedLocked(m, out)
	return out
}

// sandboxExit asks the launcher how the instance ended, waiting briefly for
// the runtime to report an exit that races the broken connection.
func sandboxExit(inst *Instance) error {
	if inst.Launched.Status == nil {
		return nil
	}
	deadline := time.Now().Add(time.Second)
	for {
		st := inst.Launched.Status()
		if st.Exited || time.Now().After(deadline) {
			return st.ExitError(inst.Spec.Name, inst.Spec.Limits)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func crashWhy(inst *Instance, err error) string {
	why := "the plugin process exited or broke the connection: " + err.Error()
	if tail := summarizeOutput(inst.stderr.String()); tail != "" {
		why += "; last output: " + strings.TrimSpace(tail)
	}
	return why
}

// Health checks a running plugin; a failing plugin is killed so the next
// use restarts it. A plugin that is not running is reported healthy: it
// starts lazily.
func (s *Supervisor) Health(ctx context.Context, name string) error {
	m, err := s.get(name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	inst := m.inst
	m.mu.Unlock()
	if inst == nil {
		return nil
	}
	hctx, cancel := context.WithTimeout(ctx, s.opts.HealthTimeout)
	defer cancel()
	if err := inst.base.Health(hctx); err != nil {
		return s.fail(m, inst, hctx, err)
	}
	return nil
}

// Restart stops the running instance of name (if any) and starts a fresh
// one now, so the next call does not pay the start.
func (s *Supervisor) Restart(ctx context.Context, name string) error {
	m, err := s.get(name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.inst != nil {
		m.inst.stop()
		s.notify(m.spec, m.inst.ID, EventStopped, nil)
		m.inst = nil
	}
	m.mu.Unlock()
	_, err = s.acquire(ctx, m)
	return err
}

// Close stops every instance.
func (s *Supervisor) Close() {
	s.mu.Lock()
	if !s.closed {
		close(s.stop)
	}
	s.closed = true
	ms := make([]*managed, 0, len(s.plugins))
	for _, m := range s.plugins {
		ms = append(ms, m)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.inst != nil {
				m.inst.stop()
				s.notify(m.spec, m.inst.ID, EventStopped, nil)
				m.inst = nil
			}
		}()
	}
	wg.Wait()
	<-s.done
	if s.binTmp != "" {
		_ = os.RemoveAll(s.binTmp)
	}
}

// binaries is the store binaries are verified into (see Options.Binaries).
func (s *Supervisor) binaries() (Binaries, error) {
	s.binOnce.Do(func() {
		if s.opts.Binaries != nil {
			s.bins = s.opts.Binaries
			return
		}
		dir, err := os.MkdirTemp("", "fluffy-cas-")
		if err != nil {
			s.binErr = fmt.Errorf("create a binary store: %w", err)
			return
		}
		s.binTmp = dir
		s.bins, s.binErr = sandbox.OpenBinaryStore(dir)
	})
	return s.bins, s.binErr
}

func (s *Supervisor) outDir(instanceID string) (string, error) {
	root := s.opts.OutRoot
	if root == "" {
		root = filepath.Join(os.TempDir(), "fluffy-out-"+s.opts.KernelID)
	}
	// The root's last component and the instance directory are created
	// without following links: a link planted there must not send a
	// plugin's writable mount elsewhere.
	if err := os.MkdirAll(filepath.Dir(root), 0o700); err != nil {
		return "", fmt.Errorf("create output directory: %w", err)
	}
	f, err := confine.MkdirAll(filepath.Dir(root), filepath.Join(filepath.Base(root), instanceID), 0o755)
	if err != nil {
		return "", err
	}
	f.Close()
	return filepath.Join(root, instanceID), nil
}

// startBudget bounds one start: the launch (sandbox create and start),
// go-plugin's handshake and Info/Configure are each bounded by StartTimeout.
func (s *Supervisor) startBudget() time.Duration { return 3 * s.opts.StartTimeout }

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func decodeSum(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("sha256 %q is not 64 hex digits", s)
	}
	return b, nil
}
