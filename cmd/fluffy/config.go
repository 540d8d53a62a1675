package main

import (
	"flag"
	"fmt"

	"path/filepath"
	"text/tabwriter"

	"github.com/fluffy-waffle/fluffy/host/config"
)

// `fluffy config init|get|set|show`: the non-security settings and where
// each value comes from (flags > FLUFFY_* > project > user > defaults).
// `config init` is `fluffy init` (commands.go).

// configFiles are the user and project config files for the project in
// the current directory (or --project).
func configFiles(e *env, project string) config.Options {
	abs, err := filepath.Abs(project)
	if err != nil {
		abs = project
	}
	return config.Options{UserFile: config.UserFile(e.home), ProjectFile: config.ProjectFile(abs), Getenv: e.getenv}
}

func configGetFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	return func(pos []string) error { return configGet(e, project, pos) }
}

func configGet(e *env, project *string, pos []string) error {
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

func configSetFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := fs.Bool("project", false, "write the project's .fluffy/config.yaml instead of the user's")
	return func(pos []string) error { return configSet(e, project, pos) }
}

func configSet(e *env, project *bool, pos []string) error {
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

func configShowFlags(e *env, fs *flag.FlagSet) func([]string) error {
	all := fs.Bool("all", false, "list every setting with its type and documentation")
	project := projectDirFlag(fs)
	asJSON := fs.Bool("json", false, "machine-readable output")
	return func([]string) error { return configShow(e, all, project, asJSON) }
}

func configShow(e *env, all *bool, project *string, asJSON *bool) error {
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
