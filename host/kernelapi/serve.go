package kernelapi

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/scheduler"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy/pin"
)

// Options are what `fluffy kernel` parsed: the kernel of one project.
type Options struct {
	Home string
	// Project is the absolute path of an existing directory.
	Project string
	Config  *config.Config
	Logger  hclog.Logger
	// IdleTimeout: exit after this long with no client and no running
	// task (0: never).
	IdleTimeout time.Duration
	Getenv      func(string) string
	// BuiltinDirs hold the builtin plugins.
	BuiltinDirs []string
	// Version is reported by kernel.status.
	Version string
}

// Serve runs the kernel of one project until ctx ends, a client asks it
// to stop, or it is idle past its timeout. It fails with KERNEL_RUNNING
// when another kernel serves the project.
func Serve(ctx context.Context, o Options) error {
	cfg, log := o.Config, o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	inL1 := o.Getenv("FLUFFY_IN_L1") == "1"
	d, err := daemon.New(daemon.Options{Home: o.Home, Project: o.Project, Logger: log, IdleTimeout: o.IdleTimeout})
	if err != nil {
		return err
	}
	defer d.Close()
	// What each provider starts with when a task brings no configuration.
	// The CLI sends its own with every task: the provider, model and key
	// of the shell that typed it, not of the one that started this kernel.
	pluginCfg := map[string][]byte{}
	for _, p := range []string{"openai", "anthropic", "replay"} {
		if b, err := ProviderConfig(o.Getenv, cfg, p, ""); err == nil {
			pluginCfg[ProviderPlugin(p)] = b
		}
	}
	if p := cfg.String("provider"); p != "" {
		if b, err := ProviderConfig(o.Getenv, cfg, p, ModelFor(cfg, p, false)); err == nil {
			pluginCfg[ProviderPlugin(p)] = b
		} else {
			log.Warn("the configured provider's settings are incomplete; tasks must bring their own", "provider", p, "error", err)
		}
	}
	sched, err := scheduler.ConfigFrom(cfg)
	if err != nil {
		return err
	}
	k, err := kernel.Open(ctx, kernel.Options{
		Home: o.Home, Workspace: o.Project, PythonVenv: cfg.String("test.python_venv"), Logger: log, ProjectSession: true, Sandbox: cfg.String("sandbox"), Getenv: o.Getenv,
		BuiltinDirs: o.BuiltinDirs, PluginConfig: pluginCfg, Scheduler: sched,
		// Clients get their prompt while the adapter starts and the image
		// is readied; the first plugin start waits for them.
		SandboxInBackground: true,
	})
	if err != nil {
		return err
	}
	defer k.Close()
	to := TaskOptions(cfg)
	to.Logger = log
	tasks, openErr := k.OpenTasks(ctx, to)
	if openErr != nil {
		tasks = nil
		log.Warn("tasks are not possible", "error", openErr)
	} else {
		defer tasks.Close()
		if err := k.RestoreConversation(tasks.Agent()); err != nil {
			log.Error("the session's conversation is not restored", "session", k.Session.ID(), "error", err)
		}
	}
	s := &Service{d: d, k: k, t: tasks, openErr: openErr, cancelOnDisconnect: cfg.String("agent.on_disconnect") == "cancel",
		facts: sessionFacts{l1: inL1, sandbox: cfg.String("sandbox"), provider: to.Provider, model: to.Model}}
	s.Register()
	if tasks != nil {
		// A task outlives its client (agent.on_disconnect: continue), and
		// Serve waits for every connection: a signal must end the task too,
		// or a kernel whose task waits for a review never exits.
		go func() {
			<-ctx.Done()
			_ = tasks.Cancel()
		}()
	}
	// A project database that stopped writing on a full disk holds what
	// it accepted in its log, but this kernel's audit chain and workflow
	// may be ahead of it: only a new kernel (the next command starts one
	// once space is freed) goes on. This one exits once its task ended.
	go func() {
		select {
		case <-k.ProjectDB.Full():
		case <-ctx.Done():
			return
		}
		for tasks != nil && tasks.Running() {
			time.Sleep(100 * time.Millisecond)
		}
		log.Error("the project database stopped writing on a full disk; the kernel exits", "error", k.ProjectDB.FullErr())
		d.Shutdown()
	}()
	d.Handle(daemon.MethodStatus, statusWith(d, map[string]any{"l1": inL1, "sandbox": cfg.String("sandbox"), "version": o.Version}))
	log.Info("kernel ready", "project", o.Project, "socket", d.Paths().Socket, "l1", inL1)
	return d.Serve(ctx)
}

// statusWith wraps the daemon's status with kernel facts.
func statusWith(d *daemon.Daemon, extra map[string]any) daemon.Method {
	return func(ctx context.Context, req *ipc.Request) (any, error) {
		st, err := d.Status()
		if err != nil {
			return nil, err
		}
		for k, v := range extra {
			st[k] = v
		}
		return st, nil
	}
}

// sessionFacts are what session.status reports that the kernel fixed at
// start.
type sessionFacts struct {
	l1                       bool
	sandbox, provider, model string
}

// status is the session.status answer.
func (s *Service) status() daemon.SessionStatus {
	k, tasks := s.k, s.t
	st := daemon.SessionStatus{Session: k.Session.ID(), L1: s.facts.l1, Sandbox: s.facts.sandbox, Provider: s.facts.provider, Model: s.facts.model, Pending: len(k.Session.Changes())}
	if p := k.Policy.Policy(); p != nil {
		st.Policy = pin.Describe(p)
		st.TestFiles = p.Tests.Describe()
		if p.Unapproved != nil {
			st.PolicyWarning = p.Unapproved.Notice()
		}
	}
	if tasks != nil {
		ws := tasks.Machine().Status()
		st.Mode, st.State, st.Writable = string(ws.Mode), string(ws.State), []string{ws.Writable}
		st.Running = tasks.Running()
		st.Budget = tasks.Agent().Budget()
		if ws.Budget.Locked {
			st.Debt = "locked"
		}
	} else {
		// No task runner (no provider configured): the session still has
		// its saved mode and state, and the user is told why no task can
		// run before typing one.
		if sum, err := k.DescribeSession(k.Session.ID()); err == nil {
			st.Mode, st.State = sum.Mode, sum.State
		}
		st.NoTasks = noTasksLine(s.openErr)
	}
	return st
}

// noTasksLine says in one line why tasks cannot run, with the fix when the
// error is a structured one.
func noTasksLine(err error) string {
	var ue *uerr.Error
	if errors.As(err, &ue) {
		if ue.Fix != "" {
			return ue.What + "; " + ue.Fix
		}
		return ue.What
	}
	return err.Error()
}
