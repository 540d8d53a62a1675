package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
)

// promptShow prints the system prompt the model would read next: the
// workflow state, the project's brief and instructions, the tools.
func promptShowFlags(e *env, fs *flag.FlagSet) func([]string) error {
	project := projectDirFlag(fs)
	asJSON := fs.Bool("json", false, `print {"system": ..., "tokens": N}`)
	return func([]string) error { return promptShow(e, project, asJSON) }
}

func promptShow(e *env, project *string, asJSON *bool) error {
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
