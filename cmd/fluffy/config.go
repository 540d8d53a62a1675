package main

import (
	"fmt"

	"path/filepath"
	"text/tabwriter"

	"github.com/fluffy-waffle/fluffy/host/config"
)

// runConfig implements `fluffy config init|get|set|show`: the non-security
// settings and where each value comes from (flags > FLUFFY_* > project >
// user > defaults).
func runConfig(e *env, args []string) error {
	return subcommands(e, "config", args, map[string]func(*env, []string) error{
		"init": configInit,
		"get":  configGet,
		"set":  configSet,
		"show": configShow,
	})
}

// configFiles are the user and project config files for the project in
// the current directory (or --project).
func configFiles(e *env, project string) config.Options {
	abs, err := filepath.Abs(project)
	if err != nil {
		abs = project
	}
	return config.Options{UserFile: config.UserFile(e.home), ProjectFile: config.ProjectFile(abs), Getenv: e.getenv}
}

// configInit is `fluffy config init`, the same command as `fluffy init`.
func configInit(e *env, args []string) error { return runInit(e, args) }

func configGet(e *env, args []string) error {
	fs := newFlags("config get")
	project := fs.String("project", ".", "project directory")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 1 {
		return usageErr("config get", "expected one KEY", "usage: fluffy config get KEY (see `fluffy config show --all`)")
	}
	if _, err := config.Lookup(pos[0]); err != nil {
		return err
	}
	cfg, err := config.Load(configFiles(e, *project))
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, cfg.String(pos[0]))
	return nil
}

func configSet(e *env, args []string) error {
	fs := newFlags("config set")
	project := fs.Bool("project", false, "write the project's .fluffy/config.yaml instead of the user's")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 2 {
		return usageErr("config set", "expected KEY VALUE", "usage: fluffy config set KEY VALUE [--project]")
	}
	path := config.UserFile(e.home)
	if *project {
		path = config.ProjectFile(".")
	}
	if err := config.Set(path, pos[0], pos[1]); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s = %s (in %s)\n", pos[0], pos[1], path)
	return nil
}

func configShow(e *env, args []string) error {
	fs := newFlags("config show")
	all := fs.Bool("all", false, "list every setting with its type and documentation")
	project := fs.String("project", ".", "project directory")
	asJSON := fs.Bool("json", false, "machine-readable output")
	if err := parseFlags(fs, args); err != nil || fs.NArg() != 0 {
		return usageErr("config show", "unexpected arguments", "usage: fluffy config show [--all] [--json] [--project DIR]")
	}
	if *all {
		for _, k := range config.Keys() {
			fmt.Fprintf(e.stdout, "%s\n    env: %v\n", config.KeyHelp(k.Name), k.Env)
		}
		return nil
	}
	cfg, err := config.Load(configFiles(e, *project))
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e.stdout, cfg.All())
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tFROM")
	for _, v := range cfg.All() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Key, v.Raw, v.Origin)
	}
	return tw.Flush()
}
