// Command wordcount is a small third-party-style tool plugin: the example the
// README walks a plugin author through. It offers one tool, text.count,
// that counts the lines, words and bytes of a project file.
//
// Build it, stamp its checksum into plugin.yaml, certify and install it:
//
//	CGO_ENABLED=0 go build -o wordcount .   # static: the sandbox image has no libc
//	fluffy plugin stamp .
//	fluffy conformance run .
//	fluffy plugin install . --yes
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

func main() {
	pluginsdk.ServeTool(New())
}

// New returns the plugin; tests use it in-process through plugintest.
func New() *pluginsdk.ToolSet {
	return &pluginsdk.ToolSet{
		Name:    "wordcount",
		Version: "1.0.0",
		Logger:  pluginsdk.NewLogger("wordcount"),
		Specs: []pluginsdk.ToolSpec{{
			Def: tool.Def{
				Name:       "text.count",
				Summary:    "Count lines, words and bytes of a project file",
				Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","minLength":1}},"required":["path"],"additionalProperties":false}`),
				OutputMode: tool.OutputFull,
			},
			Handler: count,
		}},
	}
}

type counts struct {
	Path  string `json:"path"`
	Lines int    `json:"lines"`
	Words int    `json:"words"`
	Bytes int    `json:"bytes"`
}

func count(_ context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var args struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(raw, &args); err != nil || args.Path == "" {
		return nil, uerr.New("TOOL_ARGS_INVALID", "text.count needs a path", "the arguments have no usable \"path\"", `send {"path": "src/main.go"}`)
	}
	// confine refuses absolute paths and ".." out, and its Root never
	// follows a symlink outside the workspace.
	p, err := confine.Clean(args.Path)
	if err != nil {
		return nil, err
	}
	root, err := confine.OpenRoot(tc.Workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, _, err := root.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, uerr.Wrap(err, "FS_READ", "cannot read "+p, err.Error(), "check that the path names a file")
	}
	return counts{Path: p, Lines: bytes.Count(b, []byte("\n")), Words: len(bytes.Fields(b)), Bytes: len(b)}, nil
}
