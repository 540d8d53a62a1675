package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/fluffy-waffle/fluffy/plugins/base"
)

// runVersion prints fluffy's version and the plugin API versions it speaks:
// what a plugin author needs to set api_versions in plugin.yaml.
func runVersion(e *env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "machine-readable output")
	if err := parseFlags(fs, args); err != nil || fs.NArg() != 0 {
		return usageErr("version", "unexpected arguments", "usage: fluffy version [--json]")
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(map[string]any{
			"version":             Version,
			"plugin_api_versions": base.SupportedAPIVersions(),
			"plugin_api_min":      base.APIVersionMin,
			"plugin_api_max":      base.APIVersionMax,
		})
	}
	fmt.Fprintf(e.stdout, "fluffy %s\nplugin API versions: %d-%d (a plugin's api_versions must include one of them)\n", Version, base.APIVersionMin, base.APIVersionMax)
	return nil
}
