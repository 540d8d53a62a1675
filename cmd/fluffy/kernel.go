package main

import (
	"context"
	"encoding/json"
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
	"github.com/fluffy-waffle/fluffy/uerr"
	"github.com/hashicorp/go-hclog"
)

// runKernel implements `fluffy kernel [run|status|stop]`: the kernel
// process of one project (normally started by the bootstrap, in L1 or as a
// local process) and two ways to talk to it.
func runKernel(e *env, args []string) error {
	if len(args) == 0 || args[0] == "run" || (len(args[0]) > 0 && args[0][0] == '-') {
		if len(args) > 0 && args[0] == "run" {
			args = args[1:]
		}
		return kernelRun(e, args)
	}
	return subcommands(e, "kernel", args, map[string]func(*env, []string) error{
		"status": kernelStatus,
		"stop":   kernelStop,
	})
}

func kernelRun(e *env, args []string) error {
	fs := newFlags("kernel")
	project := fs.String("project", ".", "the project this kernel serves")
	idle := fs.Duration("idle", 10*time.Minute, "exit after this long with no client and no running task (0: never)")
	logFile := fs.String("log", "", "also append the kernel's log to this file (the bootstrap passes the project's kernel log)")
	if err := parseFlags(fs, args); err != nil || fs.NArg() != 0 {
		return usageErr("kernel", "unexpected arguments", "usage: fluffy kernel [--project DIR] [--idle 10m] [--log FILE]")
	}
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

func kernelStatus(e *env, args []string) error {
	fs := newFlags("kernel status")
	project := fs.String("project", ".", "project directory")
	if err := parseFlags(fs, args); err != nil || fs.NArg() != 0 {
		return usageErr("kernel status", "unexpected arguments", "usage: fluffy kernel status [--project DIR]")
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
	st["ping_us"] = rtt.Microseconds()
	return writeJSON(e.stdout, st)
}

func kernelStop(e *env, args []string) error {
	fs := newFlags("kernel stop")
	project := fs.String("project", ".", "project directory")
	if err := parseFlags(fs, args); err != nil || fs.NArg() != 0 {
		return usageErr("kernel stop", "unexpected arguments", "usage: fluffy kernel stop [--project DIR]")
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
