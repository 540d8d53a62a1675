package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/fluffy-waffle/fluffy/sandbox"
)

// `fluffy sandbox ls|gc`: show and clean the L2 containers and volumes
// fluffy created, by their labels.

// withRuntime starts the runtime adapter under a short-lived lease of its
// own and hands its client to f.
func withRuntime(e *env, f func(ctx context.Context, rt sandbox.Runtime, runDir string) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runDir := filepath.Join(e.home, "run")
	if err := sandbox.CheckRunDir(runDir); err != nil {
		return err
	}
	bin, err := sandbox.FindAdapter(e.getenv)
	if err != nil {
		return sandbox.ErrEngineUnreachable(err)
	}
	lease, err := sandbox.AcquireLease(runDir, sandbox.NewKernelID())
	if err != nil {
		return err
	}
	defer lease.Release()
	pc, rt, err := sandbox.LaunchAdapter(ctx, &sandbox.AdapterJail{Lease: lease, EngineSocket: sandbox.EngineSocketFromEnv(e.getenv), Logger: e.log, Require: e.getenv(sandbox.EnvRequireJail) != ""}, bin, e.log)
	if err != nil {
		return err
	}
	defer pc.Kill()
	if _, err := sandbox.RequireEngine(ctx, rt); err != nil {
		return err
	}
	return f(ctx, rt, runDir)
}

func sandboxLsFlags(e *env, fs *flag.FlagSet) func([]string) error {
	orphans := fs.Bool("orphans", false, "only this home's resources whose kernel is gone")
	return func([]string) error { return sandboxLs(e, orphans) }
}

func sandboxLs(e *env, orphans *bool) error {
	return withRuntime(e, func(ctx context.Context, rt sandbox.Runtime, runDir string) error {
		inv, err := sandbox.Inventory(ctx, rt, runDir)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tNAME\tSTATUS\tPLUGIN\tTEMPLATE\tKERNEL\tSESSION\tOWNER\tORPHAN")
		n := 0
		for _, r := range inv {
			if *orphans && !r.Orphan() {
				continue
			}
			n++
			owner := "this home"
			if !r.Mine {
				owner = "other" // another $FLUFFY_HOME, user or machine: never touched from here
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%v\n", r.Kind, r.Name, r.Status, r.Plugin, r.Template, r.KernelID, r.SessionID, owner, r.Orphan())
		}
		tw.Flush()
		fmt.Fprintf(e.stdout, "%d sandbox resource(s)\n", n)
		return nil
	})
}

func sandboxGCFlags(e *env, fs *flag.FlagSet) func([]string) error {
	all := fs.Bool("all", false, "also remove sandboxes of this home's running kernels (never another home's)")
	return func([]string) error { return sandboxGC(e, all) }
}

func sandboxGC(e *env, all *bool) error {
	return withRuntime(e, func(ctx context.Context, rt sandbox.Runtime, runDir string) error {
		rep, err := sandbox.Reap(ctx, rt, runDir, *all)
		fmt.Fprintf(e.stdout, "removed %d container(s), %d volume(s), %d run dir(s)\n", len(rep.Containers), len(rep.Volumes), len(rep.RunDirs))
		return err
	})
}
