package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
)

func runVersion(e *env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "machine-readable output")
	if err := fs.Parse(args); err != nil {
		return usageErr("version", err.Error(), "usage: fluffy version [--json]")
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(map[string]any{"version": Version})
	}
	fmt.Fprintf(e.stdout, "fluffy %s\n", Version)
	return nil
}
