package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"

	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/textsafe"
)

func runPrompt(e *env, args []string) error {
	return subcommands(e, "prompt", args, map[string]func(*env, []string) error{"show": promptShow})
}

// promptShow prints the system prompt the model would read next: the
// workflow state, the project's brief and instructions, the tools.
func promptShow(e *env, args []string) error {
	fs := newFlags("prompt show")
	project := fs.String("project", ".", "project directory")
	asJSON := fs.Bool("json", false, "machine-readable output")
	if err := parseFlags(fs, args); err != nil || fs.NArg() != 0 {
		return usageErr("prompt show", "unexpected arguments", "usage: fluffy prompt show [--project DIR] [--json]")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	s, err := openSession(ctx, e, taskFlags{project: *project}, nil)
	if err != nil {
		return err
	}
	defer s.client().Close()
	var p daemon.PromptResult
	if err := s.call(ctx, daemon.MethodSessionPrompt, daemon.SessionParams{}, &p); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(p)
	}
	fmt.Fprintf(e.stdout, "%s\n\n(about %d tokens; repository text in it is the repository's, escaped here)\n", textsafe.Text(p.System, 256<<10), p.Tokens)
	return nil
}
