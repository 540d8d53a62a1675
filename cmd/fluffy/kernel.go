package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/policy/pin"
	"github.com/fluffy-waffle/fluffy/uerr"
	"github.com/hashicorp/go-hclog"
)

// `fluffy kernel [run|status|stop]`: the kernel process of one project
// (normally started by the bootstrap, in L1 or as a local process) and two
// ways to talk to it. `fluffy kernel` alone is `fluffy kernel run`.
func kernelRunFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := fs.String("project", ".", "`DIR` the project this kernel serves")
	idle := fs.Duration("idle", 10*time.Minute, "`D` exit after D with no client and no running task (0: never)")
	logFile := fs.String("log", "", "`FILE` also append the kernel's log to FILE (the bootstrap passes the project's kernel log)")
	return func([]string) error { return kernelRun(e, project, idle, logFile) }
}

func kernelRun(e *env, project *string, idle *time.Duration, logFile *string) error {
	if *logFile != "" {
		// In L1 the container goes away with the kernel (--rm): its log
		// must outlive it in $FLUFFY_HOME, where the CLI reads it.
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return uerr.Wrap(err, "KERNEL_LOG", "cannot open the kernel log "+*logFile, err.Error(), "check the permissions of $FLUFFY_HOME")
		}
		defer f.Close()
		e.log = hclog.New(&hclog.LoggerOptions{Name: "fluffy", Level: hclog.LevelFromString(envOr(e.getenv, "FLUFFY_LOG_LEVEL", "warn")), Output: io.MultiWriter(e.stderr, f)})
	}
	ws, err := existingDir(*project)
	if err != nil {
		return err
	}
	cfg, err := config.Load(config.Options{UserFile: config.UserFile(e.home), ProjectFile: config.ProjectFile(ws), Getenv: e.getenv})
	if err != nil {
		return err
	}
	inL1 := e.getenv("FLUFFY_IN_L1") == "1"
	d, err := daemon.New(daemon.Options{Home: e.home, Project: ws, Logger: e.log, IdleTimeout: *idle})
	if err != nil {
		return err
	}
	defer d.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// What each provider starts with when a task brings no configuration.
	// The CLI sends its own with every task (provider.go): the provider,
	// model and key of the shell that typed it, not of the one that
	// started this kernel.
	pluginCfg := map[string][]byte{}
	var cfgErr error
	for _, p := range []string{"openai", "anthropic", "replay"} {
		if b, err := providerConfig(e, cfg, p, ""); err == nil {
			pluginCfg[providerPlugin(p)] = b
		}
	}
	if p := cfg.String("provider"); p != "" {
		if b, err := providerConfig(e, cfg, p, modelFor(cfg, p, false)); err == nil {
			pluginCfg[providerPlugin(p)] = b
		} else {
			e.log.Warn("the configured provider's settings are incomplete; tasks must bring their own", "provider", p, "error", err)
		}
	}
	k, err := kernel.Open(ctx, kernel.Options{
		Home: e.home, Workspace: ws, PythonVenv: cfg.String("test.python_venv"), Logger: e.log, ProjectSession: true, Sandbox: cfg.String("sandbox"), Getenv: e.getenv,
		BuiltinDirs: builtinPluginDirs(e), PluginConfig: pluginCfg,
		// Clients get their prompt while the adapter starts and the image
		// is readied; the first plugin start waits for them.
		SandboxInBackground: true,
	})
	if err != nil {
		return err
	}
	defer k.Close()
	to := taskOptions(cfg)
	to.Logger = e.log
	var tasks *kernel.Tasks
	if cfgErr == nil {
		tasks, cfgErr = k.OpenTasks(ctx, to)
	}
	if cfgErr != nil {
		e.log.Warn("tasks are not possible", "error", cfgErr)
	} else {
		defer tasks.Close()
		if err := k.RestoreConversation(tasks.Agent()); err != nil {
			e.log.Error("the session's conversation is not restored", "session", k.Session.ID(), "error", err)
		}
	}
	serveTasks(d, k, tasks, cfgErr, cfg.String("agent.on_disconnect") == "cancel", func() daemon.SessionStatus {
		st := daemon.SessionStatus{Session: k.Session.ID(), L1: inL1, Sandbox: cfg.String("sandbox"), Provider: to.Provider, Model: to.Model, Pending: len(k.Session.Changes())}
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
			// No task runner (no provider configured): the session still
			// has its saved mode and state, and the user is told why no
			// task can run before typing one.
			if sum, err := k.DescribeSession(k.Session.ID()); err == nil {
				st.Mode, st.State = sum.Mode, sum.State
			}
			st.NoTasks = noTasksLine(cfgErr)
		}
		return st
	})
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
		e.log.Error("the project database stopped writing on a full disk; the kernel exits", "error", k.ProjectDB.FullErr())
		d.Shutdown()
	}()
	d.Handle("kernel.status", statusWith(d, map[string]any{"l1": inL1, "sandbox": cfg.String("sandbox"), "version": Version}))
	e.log.Info("kernel ready", "project", ws, "socket", d.Paths().Socket, "l1", inL1)
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

// existingDir resolves dir without creating it.
func existingDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return "", usageErr("kernel", fmt.Sprintf("project directory %s does not exist", abs), "pass an existing directory with --project")
	}
	return abs, nil
}

func kernelClient(e *env, project string) (*ipc.Client, error) {
	ws, err := existingDir(project)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return ipc.Dial(ctx, daemon.PathsFor(e.home, ws).Socket, 0)
}

func kernelStatusFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	return func([]string) error { return kernelStatus(e, project) }
}

func kernelStatus(e *env, project *string) error {
	cl, err := kernelClient(e, *project)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rtt, err := cl.Ping(ctx)
	if err != nil {
		return err
	}
	res, err := cl.Call(ctx, "kernel.status", nil, nil)
	if err != nil {
		return err
	}
	var st map[string]any
	_ = json.Unmarshal(res, &st)
	st["ping_us"] = rtt.Microseconds()
	return writeJSON(e.stdout, st)
}

func kernelStopFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	return func([]string) error { return kernelStop(e, project) }
}

func kernelStop(e *env, project *string) error {
	cl, err := kernelClient(e, *project)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Call(ctx, "kernel.shutdown", nil, nil); err != nil {
		return err
	}
	// Return once it has exited (its lock is free): a script that stops
	// the kernel and then moves or deletes the project must not pull the
	// databases from under a kernel that is still closing them.
	ws, _ := existingDir(*project)
	if !waitKernelExit(e, daemon.PathsFor(e.home, ws).Lock) {
		fmt.Fprintln(e.stdout, "kernel stopping")
		return nil
	}
	fmt.Fprintln(e.stdout, "kernel stopped")
	return nil
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
