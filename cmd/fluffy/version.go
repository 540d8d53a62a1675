package main

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/fluffy-waffle/fluffy/plugins/base"
)

// runVersion prints fluffy's version and the plugin API versions it speaks:
// what a plugin author needs to set api_versions in plugin.yaml.
func runVersionFlags(e *env, fs *flag.FlagSet) func([]string) error {
	asJSON := fs.Bool("json", false, `print {"version": ..., "plugin_api_versions": [...], "plugin_api_min": N, "plugin_api_max": N}`)
	return func([]string) error { return runVersion(e, asJSON) }
}

func runVersion(e *env, asJSON *bool) error {
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
