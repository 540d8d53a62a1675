package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk/plugintest"
)

// This is how a plugin author tests their plugin: in-process for speed,
// and once as a real binary through the same handshake the kernel uses.
func TestCount(t *testing.T) {
	env := plugintest.NewEnv(t, map[string]string{"a.txt": "one two\nthree\n"})
	for _, c := range []tool.Client{
		plugintest.InProcessTool(t, New(), 2, env),
		plugintest.StartTool(t, plugintest.Build(t, "."), env).Tool,
	} {
		r, err := c.Execute(context.Background(), tool.Call{ID: "1", Tool: "text.count", Args: json.RawMessage(`{"path":"a.txt"}`)}, nil)
		if err != nil || !r.OK {
			t.Fatalf("%v %+v", err, r)
		}
		var got counts
		json.Unmarshal(r.Output, &got)
		if got != (counts{Path: "a.txt", Lines: 2, Words: 3, Bytes: 14}) {
			t.Fatalf("got %+v", got)
		}
		r, _ = c.Execute(context.Background(), tool.Call{ID: "2", Tool: "text.count", Args: json.RawMessage(`{"path":"../etc/passwd"}`)}, nil)
		if r.OK || r.Err.Code != "FS_PATH_ESCAPES" {
			t.Fatalf("escape not refused: %+v", r)
		}
	}
}
