package main

import (
	"os"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

// version is stamped by the build; it must match plugin.yaml.
const version = "0.1.0"

func main() {
	if len(os.Args) > 1 && os.Args[1] == landlock.Arg {
		landlock.Main(os.Args[2:])
		return
	}
	logger := pluginsdk.NewLogger("tool-mcp")
	b := newBridge(logger)
	defer b.close()
	pluginsdk.ServeTool(b)
}
