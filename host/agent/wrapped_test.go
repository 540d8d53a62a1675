package agent

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// argTools records the arguments each call reached the tools with.
type argTools struct {
	*memTools
	mu   sync.Mutex
	args map[string]string
}

func (a *argTools) Call(ctx context.Context, id, name string, args json.RawMessage) ToolResult {
	a.mu.Lock()
	a.args[id] = string(args)
	a.mu.Unlock()
	return ToolResult{OK: true, Output: json.RawMessage(`{}`)}
}

// TestWrappedArgumentsReachTheRouter: a call whose arguments the model
// wrapped in a markdown fence or a JSON string is not refused by the loop
// as "not a JSON object": it goes to the tools (the router, which unwraps
// and audits it) as sent. Arguments that wrap nothing stay refused.
func TestWrappedArgumentsReachTheRouter(t *testing.T) {
	fenced := "```json\n{\"path\":\"a.go\"}\n```"
	str, _ := json.Marshal(`{"path":"a.go"}`)
	prose := "read a.go"
	turn := func(req provider.ChatRequest) []provider.Event {
		var evs []provider.Event
		for _, c := range []struct{ id, raw string }{{"c1", fenced}, {"c2", string(str)}, {"c3", prose}} {
			evs = append(evs, provider.Event{ToolCallStart: &provider.ToolCallStart{CallID: c.id, Name: "fs.read"}},
				provider.Event{ToolCallEnd: provider.CheckArguments(c.id, "fs.read", c.raw, false)})
		}
		return append(evs, provider.Event{Done: &provider.Done{StopReason: provider.StopToolUse}})
	}
	m := &scripted{turns: []func(provider.ChatRequest) []provider.Event{turn, text("done")}}
	a, mt, _, _ := newTestAgent(m, map[string]string{"a.go": "package a"})
	at := &argTools{memTools: mt, args: map[string]string{}}
	a.o.Tools = at
	a.Run(context.Background(), "read it")
	if at.args["c1"] != fenced || at.args["c2"] != string(str) {
		t.Fatalf("wrapped calls reached the tools as %q", at.args)
	}
	if _, ran := at.args["c3"]; ran {
		t.Fatal("a call whose arguments wrap no object ran")
	}
}
