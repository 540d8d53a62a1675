package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// BenchmarkEncodeRequest builds and encodes (the SDK's encoder) a
// 200-message tool loop with 20 tools, as Chat does once per turn.
func BenchmarkEncodeRequest(b *testing.B) {
	req := provider.ChatRequest{System: "you are a coder", MaxTokens: 4096}
	for i := 0; i < 20; i++ {
		req.Tools = append(req.Tools, provider.ToolSpec{Name: fmt.Sprintf("t.x%d", i), Description: "a tool",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path"]}`)})
	}
	for i := 0; i < 50; i++ {
		id := fmt.Sprintf("call_%d", i)
		req.Messages = append(req.Messages, provider.Message{Role: "user", Content: "please do the thing number " + id},
			provider.Message{Role: "assistant", Content: "ok", Reasoning: []provider.ReasoningBlock{{Text: "think", Signature: "sig"}},
				ToolCalls: []provider.ToolCall{{ID: id, Name: "t.x1", Arguments: json.RawMessage(`{"path":"a/b/c.go","n":3}`)}}},
			provider.Message{Role: "tool", ToolCallID: id, Content: strings.Repeat("line of test output\n", 100)},
			provider.Message{Role: "assistant", Content: "done with it"})
	}
	names, err := provider.ToolNamesOf(req.Tools)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := buildRequest(req, "m", "http://x/v1", names).MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}
