package main

import (
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/fluffy-waffle/fluffy/host/sandboxadmin"
)

// `fluffy sandbox ls|gc`: show and clean the L2 containers and volumes
// fluffy created, by their labels.

func sandboxLsFlags(e *env, fs *flag.FlagSet) func([]string) error {
	orphans := fs.Bool("orphans", false, "only this home's resources whose kernel is gone")
	return func([]string) error { return sandboxLs(e, orphans) }
}

func sandboxLs(e *env, orphans *bool) error {
	inv, err := sandboxadmin.New(e.home, e.getenv, e.log).Inventory()
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
}

func sandboxGCFlags(e *env, fs *flag.FlagSet) func([]string) error {
	all := fs.Bool("all", false, "also remove sandboxes of this home's running kernels (never another home's)")
	return func([]string) error { return sandboxGC(e, all) }
}

func sandboxGC(e *env, all *bool) error {
	rep, err := sandboxadmin.New(e.home, e.getenv, e.log).Reap(*all)
	if rep != nil {
		fmt.Fprintf(e.stdout, "removed %d container(s), %d volume(s), %d run dir(s)\n", len(rep.Containers), len(rep.Volumes), len(rep.RunDirs))
	}
	return err
}
