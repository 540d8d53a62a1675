package main

import (
	"context"
	"encoding/json"
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
	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return kernelapi.Serve(ctx, kernelapi.Options{Home: e.home, Project: ws, Config: cfg, Logger: e.log, IdleTimeout: *idle,
		Getenv: e.getenv, BuiltinDirs: builtinPluginDirs(e), Version: Version})
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
	// No kernel is an answer, not an error: its lock is free.
	if ws, err := existingDir(*project); err == nil && lockFree(daemon.PathsFor(e.home, ws).Lock) {
		return writeJSON(e.stdout, map[string]any{"running": false, "project": ws})
	}
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
	st["running"] = true
	st["ping_us"] = rtt.Microseconds()
	return writeJSON(e.stdout, st)
}

func kernelStopFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	return func([]string) error { return kernelStop(e, project) }
}

func kernelStop(e *env, project *string) error {
	if ws, err := existingDir(*project); err == nil && lockFree(daemon.PathsFor(e.home, ws).Lock) {
		fmt.Fprintln(e.stdout, "no kernel running for "+safeLine(ws, 200))
		return nil
	}
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
