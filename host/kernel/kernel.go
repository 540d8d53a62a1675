package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/callbacks"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/scheduler"
	"github.com/fluffy-waffle/fluffy/host/state"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/diskfree"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/pin"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// Options configure a kernel.
type Options struct {
	// Home is $FLUFFY_HOME: the plugin store and the home database.
	Home string
	// Workspace is the project root plugins see read-only.
	Workspace string
	// PythonVenv is a virtualenv outside the project that test.run uses
	// (test.python_venv), "" for the project's own .venv or venv.
	PythonVenv string
	Logger     hclog.Logger
	// Sandbox picks the L2 runtime: docker (default), bwrap, or none.
	Sandbox string
	// SandboxInBackground prepares the docker sandbox (runtime adapter,
	// reaping, base image) after Open returns; the first plugin start
	// waits for it. `fluffy kernel` sets it so that its clients get an
	// answer before the sandbox is ready.
	SandboxInBackground bool
	// Launcher, when set, replaces the one Sandbox would build (tests).
	Launcher  supervisor.Launcher
	SessionID string
	// ProjectSession opens the project's current session (its store's
	// pointer; FirstSession for a project without one) instead of
	// SessionID.
	ProjectSession bool
	SessionMode    string
	StartTimeout   time.Duration
	// Getenv reads DOCKER_HOST and FLUFFY_RUNTIME_ADAPTER (default os.Getenv).
	Getenv func(string) string
	// NetworkAuditor hears every request through the provider proxy.
	NetworkAuditor sandbox.Auditor
	// Progress receives one line per slow start-up step and plugin progress.
	Progress func(string)
	// Policy judges plugin callbacks; nil loads the project's policy and
	// reloads it when its file changes (every PolicyReloadInterval,
	// default 1 s).
	Policy               *policy.Engine
	PolicyReloadInterval time.Duration
	// BuiltinDirs are fluffy's own plugin directories (bin/plugins beside
	// the binary); the kernel discovers them at start so builtin plugins
	// work without an install. Missing directories are ignored.
	BuiltinDirs []string
	// PluginConfig is the configuration each named plugin receives at
	// Configure (e.g. a provider's base URL, key and model); it never
	// reaches the plugin's environment or the audit log.
	PluginConfig map[string][]byte
	// Scheduler limits how many sandboxed calls run at once (zero: the
	// scheduler's defaults: 4 in all, 2 per template, 1 policy-sandbox).
	Scheduler scheduler.Config
	// AuditRetention bounds the project and home audit logs (zero fields:
	// audit's defaults, 90 days / 1 GiB / 30 days protected). It is
	// applied at start and every RetentionInterval (default
	// DefaultRetentionInterval, 1 h) while the kernel runs.
	AuditRetention    audit.Retention
	RetentionInterval time.Duration
	// AuditClock stamps audit records (nil: the wall clock).
	AuditClock audit.Clock
	// BadgerDefaults opens the databases with badger's default sizes
	// instead of fluffy's (the idle-memory benchmark's baseline).
	BadgerDefaults bool
	// TokenSweepInterval overrides how often expired capability tokens
	// are removed (default TokenSweepInterval, 10 s).
	TokenSweepInterval time.Duration
}

// Kernel wires the registry to the supervisor: every registered, enabled
// plugin is loaded (lazily started on first use) and its lifecycle is
// mirrored into the registry.
type Kernel struct {
	Registry *registry.Registry
	Plugins  *supervisor.Supervisor
	// HomeAudit records plugin registry events ($FLUFFY_HOME/db, opened
	// per use: see Home); Audit is the project's log
	// (<workspace>/.fluffy/db), open for the kernel's life.
	HomeAudit *HomeLog
	Audit     *audit.Log
	// ProjectDB is the project's database (<workspace>/.fluffy/db).
	ProjectDB *store.DB
	// Policy judges every kernel callback a plugin makes.
	Policy *policy.Engine
	// Router is the one path of every tool call.
	Router *router.Router
	// Scheduler runs every sandboxed call the router dispatches, within
	// the concurrency limits of its template.
	Scheduler *scheduler.Scheduler
	// Session is the session's workspace: the views plugins see as
	// /workspace and (later) the changeset.
	Session *workspace.Session
	// SessionStore keeps the project's sessions and which one is current.
	SessionStore *state.Sessions
	catalog      *catalog
	// kernelTools are the tools the kernel serves itself (registered by
	// the task runner).
	kernelTools kernelTools
	// provMu guards provider, pluginConfig and manifestNet: a task may
	// switch the provider and its configuration (providers.go).
	provMu sync.Mutex
	// provider is the provider plugin the task runner talks to (the
	// caller of the kernel tools the model asks for).
	provider     string
	pluginConfig map[string][]byte
	// manifestNet is each plugin's network allowlist before the host of
	// its configured base URL was added.
	manifestNet map[string][]string
	// stopPolicyWatch ends the project policy's hot reload (nil when the
	// caller supplied the engine).
	stopPolicyWatch func()
	// maint runs periodic audit retention and the token sweep (nil until
	// Open starts it).
	maint           *maintenance
	tokenSweepEvery time.Duration
	// gateState reads the session's workflow state (set by the task
	// runner): the policy sees it at ingest as state_machine_state.
	gateState   atomic.Pointer[func() string]
	sessionMode string
	ephemeral   bool // the session was made for this kernel alone
	workspace   string
	home        string
	sandboxed   bool
	progress    func(string)
	homeDB      *Home
	sb          *sandboxes
	log         hclog.Logger
	// states is this kernel's view of its plugins' lifecycle (loaded,
	// active, unloaded): per kernel, so it is kept here and not in the
	// registry every kernel of the user shares.
	statesMu sync.Mutex
	states   map[string]registry.State
}

// PluginState is the lifecycle state of the named plugin in this kernel:
// loaded (added, not started), active (its instance runs), unloaded (it
// stopped), or "" when this kernel did not load it.
func (k *Kernel) PluginState(name string) registry.State {
	k.statesMu.Lock()
	defer k.statesMu.Unlock()
	return k.states[name]
}

func (k *Kernel) setPluginState(name string, st registry.State) {
	k.statesMu.Lock()
	defer k.statesMu.Unlock()
	if k.states == nil {
		k.states = map[string]registry.State{}
	}
	k.states[name] = st
}

// Open starts a kernel. Plugins are not launched until used.
func Open(ctx context.Context, o Options) (*Kernel, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	// The project must exist: the kernel keeps its database in
	// <project>/.fluffy and would otherwise create a mistyped --project.
	if fi, err := os.Stat(o.Workspace); err != nil || !fi.IsDir() {
		return nil, uerr.New("PROJECT_NOT_FOUND", fmt.Sprintf("project directory %s does not exist", o.Workspace),
			"fluffy works on an existing project and creates none",
			"pass --project with the path of an existing project directory (or cd into it)")
	}
	// The home database is shared with every other kernel and the plugin
	// CLI: it is opened per operation, never held for the kernel's life.
	home, err := OpenHome(o.Home, HomeOptions{Logger: o.Logger, Project: o.Workspace, Command: "fluffy kernel", Clock: o.AuditClock, Retention: o.AuditRetention, BadgerDefaults: o.BadgerDefaults})
	if err != nil {
		return nil, err
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	k := &Kernel{homeDB: home, HomeAudit: home.Audit, log: o.Logger.Named("kernel"), workspace: o.Workspace, home: o.Home, progress: o.Progress, sessionMode: o.SessionMode, pluginConfig: o.PluginConfig}
	watchPolicy := false
	pins := pin.NewStore(o.Home)
	if o.Policy == nil {
		// The project's policy file applies only once the user approved
		// its content (a cloned repository ships whatever it likes).
		p, err := pin.Load(o.Workspace, pins)
		if err != nil {
			_ = home.Close()
			return nil, err
		}
		o.Policy = policy.NewEngine(p, policy.Options{Logger: o.Logger})
		watchPolicy = true
	}
	k.Policy = o.Policy
	// Verify the home log's tail once at start, as the project's is.
	if err := k.HomeAudit.With(ctx, func(*audit.Log) error { return nil }); err != nil {
		k.Close()
		return nil, err
	}
	// The project database is shared: the audit log, the workflow
	// machine's session store (and the changeset) live in it.
	// A cloned project may ship .fluffy or .fluffy/db as a link: the
	// database is created only where it belongs, never through one.
	dbDir, err := confine.MkdirAll(o.Workspace, ".fluffy/db", 0o700)
	if err != nil {
		k.Close()
		return nil, err
	}
	dbDir.Close()
	if err := diskfree.Ensure(dbDir.Name(), 0, "the project database in "+dbDir.Name()); err != nil {
		k.Close()
		return nil, err
	}
	// Held for the kernel's life (one kernel per project); the holder
	// record lets whoever finds it locked name this kernel.
	if k.ProjectDB, err = store.Open(ctx, store.Options{Dir: store.DefaultDir(o.Workspace), Logger: o.Logger,
		Holder: store.Holder{Project: o.Workspace, Command: "fluffy kernel"}, BadgerDefaults: o.BadgerDefaults}); err != nil {
		k.Close()
		return nil, err
	}
	if k.Audit, err = audit.Open(ctx, audit.Options{DB: k.ProjectDB, Logger: o.Logger, Clock: o.AuditClock, Retention: o.AuditRetention}); err != nil {
		k.Close()
		return nil, err
	}
	k.applyRetention(ctx)
	k.tokenSweepEvery = o.TokenSweepInterval
	if k.tokenSweepEvery <= 0 {
		k.tokenSweepEvery = TokenSweepInterval
	}
	k.startMaintenance(o.RetentionInterval)
	if watchPolicy {
		if u := k.Policy.Policy().Unapproved; u != nil {
			k.log.Warn(u.Notice())
			if err := (Auditor{Log: k.Audit, Logger: o.Logger}).RecordUnapprovedPolicy(ctx, u, k.Policy.Policy().Hash, "kernel start"); err != nil {
				k.Close()
				return nil, err
			}
		}
	}
	k.Registry = home.Registry(o.Home, o.Logger)
	if o.NetworkAuditor == nil {
		o.NetworkAuditor = Auditor{Log: k.Audit, Logger: o.Logger}
	}
	k.SessionStore = state.NewSessions(k.ProjectDB, nil)
	if o.ProjectSession {
		cur, err := k.SessionStore.Current(FirstSession)
		if err != nil {
			k.Close()
			return nil, err
		}
		o.SessionID = cur.ID
	}
	if err := k.openSession(ctx, o); err != nil {
		k.Close()
		return nil, err
	}
	launcher := o.Launcher
	kernelID := ""
	if launcher == nil {
		sb, err := openSandboxes(ctx, o, o.Logger)
		if err != nil {
			k.Close()
			return nil, err
		}
		k.sb, launcher, kernelID = sb, sb.launcher, sb.lease.KernelID
		k.sandboxed = o.Sandbox != SandboxNone
	}
	if _, err := toolchains(k.Policy.Policy(), o.Home, o.Workspace, o.PythonVenv, o.Getenv(EnvHostRoot), k.log); err != nil {
		k.Close()
		return nil, err
	}
	bins, err := HomeBinaries(o.Home)
	if err != nil {
		k.Close()
		return nil, err
	}
	k.Plugins = supervisor.New(supervisor.Options{
		Logger: o.Logger, Launcher: launcher, StartTimeout: o.StartTimeout, KernelID: kernelID, Binaries: bins,
		SessionID: k.Session.ID(), SessionMode: o.SessionMode,
		Views:     views{k: k, mode: o.SessionMode},
		OutRoot:   filepath.Join(k.Session.Dir(), "out"),
		Observer:  k,
		Admission: k,
		// What plugins call back into the kernel for: judged by the
		// policy, read from the session's views, audited.
		KernelService: callbacks.New(callbacks.Options{
			Policy: k.Policy, Audit: k.auditor(), Views: k.Session, Logger: k.log,
			Caller: callerOf, Sandbox: k.sandboxOf, Progress: k.progress,
		}).For,
		HealthInterval: 30 * time.Second,
		// Read at every start, so a changed policy applies to the next one.
		Toolchains: func() ([]sandbox.Toolchain, error) {
			return toolchains(k.Policy.Policy(), o.Home, o.Workspace, o.PythonVenv, o.Getenv(EnvHostRoot), k.log)
		},
		BuildCache: BuildCacheDir(o.Home, o.Workspace),
		HostGoCache: sync.OnceValue(func() sandbox.Toolchain {
			return HostGoCache(o.Getenv, o.Home, o.Workspace, o.Getenv(EnvHostRoot), k.log)
		}),
	})
	// One catalog (and its parsed-manifest cache) serves the router, the
	// agent's tool list and ingest.
	k.catalog = &catalog{k: k, manifests: map[string]*manifests.Manifest{}, loaded: map[string]*manifests.Manifest{}}
	if k.Scheduler, err = scheduler.New(scheduler.Options{Config: o.Scheduler, Logger: o.Logger}); err != nil {
		k.Close()
		return nil, err
	}
	k.Router = router.New(router.Options{
		Catalog:    k.catalog,
		Dispatcher: dispatcher{k: k},
		Policy:     k.Policy,
		Audit:      k.Audit,
		Scheduler:  routerScheduler{s: k.Scheduler, seq: new(atomic.Uint64), running: k.pluginRunning},
		Logger:     o.Logger,
	})
	for _, d := range o.BuiltinDirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if _, err := k.Registry.Scan(ctx, d, o.BuiltinDirs); err != nil {
			k.log.Warn("discovering builtin plugins failed", "dir", d, "error", err)
		}
	}
	if err := k.loadAll(ctx); err != nil {
		k.Close()
		return nil, err
	}
	k.loadMCP(o.Home, o.Workspace, o.Getenv(EnvHostRoot))
	if pol := k.Policy.Policy(); len(pol.Extensions) > 0 {
		k.connectExtensions(ctx, pol)
	}
	// Watched once the plugins are loaded: a reload connects the
	// extensions the new policy names.
	if watchPolicy {
		k.watchPolicy(policy.ProjectPath(o.Workspace), pins, o.PolicyReloadInterval)
	}
	if _, err := k.Audit.Append(ctx, audit.Event{Type: audit.EventKernelStart, SessionID: o.SessionID, Metadata: map[string]string{"kernel": kernelID, "sandbox": o.Sandbox}}); err != nil {
		k.Close()
		return nil, err
	}
	return k, nil
}

// loadAll adds, for every plugin name, the version that runs (Registry.Get:
// the builtin one if fluffy ships the name, else the newest) unless it is
// disabled.
func (k *Kernel) loadAll(ctx context.Context) error {
	recs, err := k.Registry.List(registry.Filter{})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, x := range recs {
		if seen[x.Name] {
			continue
		}
		seen[x.Name] = true
		r, err := k.Registry.Get(x.Name)
		if err != nil {
			return err
		}
		if r.State == registry.StateDisabled {
			continue
		}
		if sh, _ := k.Registry.Shadowed(r.Name); len(sh) > 0 {
			for _, x := range sh {
				k.log.Warn("a plugin in the store has the name of a builtin plugin and never runs: fluffy's own is used", "plugin", x.Name, "version", x.Version, "dir", x.Dir, "fix", "fluffy plugin remove "+x.Name+"@"+x.Version)
				if k.progress != nil {
					k.progress(fmt.Sprintf("note: %s@%s from %s is not used: %s is a builtin plugin name, so fluffy's own runs (remove it with `fluffy plugin remove %s@%s`)", x.Name, x.Version, x.Dir, x.Name, x.Name, x.Version))
				}
			}
		}
		spec, err := k.Registry.Runnable(r.Name)
		if err == nil {
			k.provMu.Lock()
			k.setManifestNet(spec.Name, spec.Network)
			configure(&spec, k.pluginConfig[spec.Name])
			k.provMu.Unlock()
			err = k.Plugins.Add(spec)
		}
		if err != nil {
			k.log.Warn("plugin not loaded", "plugin", r.Name, "error", err)
			_ = k.Registry.SetState(ctx, r.Name, r.Version, registry.StateRejected, err.Error())
			continue
		}
		if r.State == registry.StateRejected {
			// An earlier kernel refused it; this one loaded it.
			_ = k.Registry.SetState(ctx, spec.Name, spec.Version, registry.StateRegistered, "")
		}
		k.setPluginState(spec.Name, registry.StateLoaded)
	}
	return nil
}

// PluginEvent keeps this kernel's view of its plugins' lifecycle
// (PluginState); the shared registry is not touched.
func (k *Kernel) PluginEvent(spec supervisor.Spec, instanceID, event string, cause error) {
	switch event {
	case supervisor.EventStarted:
		k.setPluginState(spec.Name, registry.StateActive)
	case supervisor.EventStopped:
		k.setPluginState(spec.Name, registry.StateUnloaded)
		k.revokeTokens(context.Background(), instanceID)
	case supervisor.EventBreakerOpen:
		k.log.Error("plugin circuit breaker opened", "plugin", spec.Name, "error", cause)
	case supervisor.EventFailed:
		k.log.Warn("plugin failed", "plugin", spec.Name, "error", cause)
		k.revokeTokens(context.Background(), instanceID)
	}
}

// Close stops every plugin and closes the database.
func (k *Kernel) Close() {
	k.maint.stop()
	if k.stopPolicyWatch != nil {
		k.stopPolicyWatch()
	}
	if k.Scheduler != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = k.Scheduler.Close(ctx)
		cancel()
	}
	if k.Plugins != nil {
		k.Plugins.Close()
	}
	if k.sb != nil {
		k.sb.close()
	}
	if k.Audit != nil {
		_, _ = k.Audit.Append(context.Background(), audit.Event{Type: audit.EventKernelShutdown})
		_ = k.Audit.Close()
	}
	if k.ProjectDB != nil {
		_ = k.ProjectDB.Close()
	}
	if k.Session != nil {
		if k.ephemeral {
			_ = k.Session.Remove()
		} else {
			_ = k.Session.Close()
		}
	}
	if k.homeDB != nil {
		_ = k.homeDB.Close()
	}
}

// pluginRunning reports whether plugin has a live instance.
func (k *Kernel) pluginRunning(plugin string) bool {
	st, err := k.Plugins.Stats(plugin)
	return err == nil && st.Running
}

func (k *Kernel) auditor() Auditor { return Auditor{Log: k.Audit, Logger: k.log} }

// baseURLHost is host:port of a plugin config's base_url ("" when none).
func baseURLHost(cfg []byte) string {
	if len(cfg) == 0 {
		return ""
	}
	var c struct {
		BaseURL string `json:"base_url"`
	}
	if json.Unmarshal(cfg, &c) != nil || c.BaseURL == "" {
		return ""
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// routerScheduler submits the router's calls to the scheduler.
type routerScheduler struct {
	s *scheduler.Scheduler
	// seq makes task ids unique: a model reuses call ids across turns.
	seq *atomic.Uint64
	// running reports whether plugin has a live session instance.
	running func(plugin string) bool
}

func (r routerScheduler) Run(ctx context.Context, t router.Task) error {
	if t.Template == "" {
		// Not sandboxed (a kernel tool, --sandbox=none): no template
		// limit applies, and the scheduler only runs sandboxed work.
		return t.Run(ctx)
	}
	if t.Light && r.running != nil && r.running(t.Plugin) {
		// A light read into a session instance that is already running
		// allocates no sandbox and does no heavy work: it does not queue
		// behind the template's limit, which counts sandboxes at work
		// (docs/decisions/light-reads.md). A
		// light call that must start the instance is a task like any
		// other: the start is a sandbox allocation.
		return t.Run(ctx)
	}
	typ := scheduler.Validate
	if t.Tool == task.ToolTestRun {
		typ = scheduler.TestRun
	}
	pr := scheduler.Priority(t.Priority)
	if pr == 0 {
		pr = scheduler.PriorityNormal
	}
	return r.s.Run(ctx, scheduler.Task{ID: fmt.Sprintf("%s#%d", t.Name, r.seq.Add(1)), Type: typ, Priority: pr, Template: t.Template, Run: t.Run})
}
