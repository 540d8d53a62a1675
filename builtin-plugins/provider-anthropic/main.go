package main

import (
	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

// version must match plugin.yaml.
const version = "0.1.0"

func main() {
	pluginsdk.ServeProvider(newAnthropic(pluginsdk.NewLogger(pluginName), upstream.NewHTTPClient(nil)))
}
