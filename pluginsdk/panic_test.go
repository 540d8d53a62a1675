package pluginsdk_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
	"github.com/fluffy-waffle/fluffy/pluginsdk/plugintest"
)

// TestHandlerPanicIsAStructuredError: a handler's panic becomes
// a TOOL_PANIC result naming file:line and the plugin's author; the plugin
// keeps serving. Before, the panic killed the process (here: the test
// binary).
func TestHandlerPanicIsAStructuredError(t *testing.T) {
	set := &pluginsdk.ToolSet{Name: "panicky", Version: "1.0.0", Specs: []pluginsdk.ToolSpec{
		{Def: tool.Def{Name: "p.nil", Parameters: json.RawMessage(`{"type":"object"}`)}, Handler: func(context.Context, *pluginsdk.ToolContext, json.RawMessage) (any, error) {
			var m map[string]int
			m["boom"] = 1 // a nil map write: a runtime panic
			return nil, nil
		}},
		{Def: tool.Def{Name: "p.ok", Parameters: json.RawMessage(`{"type":"object"}`)}, Handler: func(context.Context, *pluginsdk.ToolContext, json.RawMessage) (any, error) {
			return "fine", nil
		}},
	}}
	for _, v := range []int{1, 2} {
		c := plugintest.InProcessTool(t, set, v, plugintest.NewEnv(t, nil))
		r, err := c.Execute(context.Background(), tool.Call{ID: "1", Tool: "p.nil", Args: json.RawMessage(`{}`)}, nil)
		if err != nil || r.OK || r.Err == nil {
			t.Fatalf("v%d: %v %+v", v, err, r)
		}
		if r.Err.Code != pluginsdk.CodeToolPanic || !strings.Contains(r.Err.What, "panic_test.go:") || !strings.Contains(r.Err.Why, "nil map") || !strings.Contains(r.Err.Fix, "author") {
			t.Fatalf("v%d: %+v", v, r.Err)
		}
		r, err = c.Execute(context.Background(), tool.Call{ID: "2", Tool: "p.ok", Args: json.RawMessage(`{}`)}, nil)
		if err != nil || !r.OK {
			t.Fatalf("v%d: the plugin did not keep serving: %v %+v", v, err, r)
		}
	}
}
