package main

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	pt "github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// updateGolden rewrites testdata/requests from the current builder. The
// files were generated from the hand-written JSON builder that preceded
// the SDK's typed params (commit "provider-openai: golden request bodies
// from the hand-built JSON"); do not regenerate them to make a drift pass.
var updateGolden = flag.Bool("update-golden", false, "rewrite the golden request bodies")

const compatURL = "http://llm.internal:8080/v1"

func temp(f float64) *float64 { return &f }

var readTool = provider.ToolSpec{Name: "fs.read", Description: "read a file",
	Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","maxLength":4096}},"required":["path"],"additionalProperties":false}`)}

// execTool has neither description nor parameters: the builder sends an
// empty object schema.
var execTool = provider.ToolSpec{Name: "shell.exec"}

var toolLoop = []provider.Message{
	{Role: provider.RoleUser, Content: "read a.go and b.go, then run the tests"},
	{Role: provider.RoleAssistant, Content: "Reading both.", Reasoning: []provider.ReasoningBlock{{Text: "two files", Signature: "sig-ignored"}},
		ToolCalls: []provider.ToolCall{
			{ID: "call_a", Name: "fs.read", Arguments: json.RawMessage(`{"path":"a.go"}`)},
			{ID: "call_b", Name: "fs.read", Arguments: json.RawMessage(`{"path": "b.go", "n": 1.50}`)}}},
	{Role: provider.RoleTool, ToolCallID: "call_a", Content: "package a\n"},
	{Role: provider.RoleTool, ToolCallID: "call_b", Content: "no such file: b.go", IsError: true},
	{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_c", Name: "shell.exec"}}},
	{Role: provider.RoleTool, ToolCallID: "call_c", Content: "", CacheBreakpoint: true},
	{Role: provider.RoleAssistant, Content: "a.go is fine; b.go is missing."},
	{Role: provider.RoleUser, Content: "thanks"},
}

var user = []provider.Message{{Role: provider.RoleUser, Content: "hi ünïcode <&> \"q\""}}

// requestCases are representative turns; each one's body is compared with
// testdata/requests/<name>.json.
var requestCases = []struct {
	name    string
	baseURL string
	req     provider.ChatRequest
	// accept: deliberate differences from the golden file (JSON pointer →
	// the value sent now), each explained.
	accept map[string]any
}{
	{"system_user", compatURL, provider.ChatRequest{MaxTokens: 256, System: "be brief", Messages: user}, nil},
	{"openai_host", "https://api.openai.com/v1", provider.ChatRequest{Model: "o3", MaxTokens: 1000, System: "be brief", Messages: user,
		Temperature: temp(0), Reasoning: &provider.Reasoning{Effort: "high", BudgetTokens: 4096}}, nil},
	{"no_max_tokens", compatURL, provider.ChatRequest{Model: "qwen3-coder", Temperature: temp(0.7), Messages: user}, nil},
	{"tool_loop", compatURL, provider.ChatRequest{MaxTokens: 4096, System: "you are a coder", Messages: toolLoop, Tools: []provider.ToolSpec{readTool, execTool},
		CacheSystem: true, CacheTools: true}, nil},
	{"choice_none", compatURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool}, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceNone}}, nil},
	{"choice_required", compatURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool}, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceRequired}}, nil},
	{"choice_auto", compatURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool}, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceAuto}}, nil},
	{"choice_tool", compatURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool, execTool}, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceTool, Name: "shell.exec"}}, nil},
	{"choice_without_tools", compatURL, provider.ChatRequest{Messages: user, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceRequired}, DisableParallelToolCalls: true}, nil},
	{"no_parallel", compatURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool}, DisableParallelToolCalls: true}, nil},
	{"system_message_and_empty_text", compatURL, provider.ChatRequest{Messages: []provider.Message{
		{Role: provider.RoleSystem, Content: "from the kernel"},
		{Role: provider.RoleUser, Content: ""},
		{Role: provider.RoleAssistant, Content: ""},
		{Role: provider.RoleUser, Content: "go on"}}}, nil},
	{"schema_not_an_object", compatURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{{Name: "odd", Parameters: json.RawMessage(`true`)}}}, nil},
	// Deliberate differences, none reachable from the kernel: a role it
	// never sends goes as user (the SDK has no free-form role), a tool
	// result without a call id sends the SDK's required "" (the server
	// refuses both forms), no messages at all is [] instead of null.
	{"edge_role_and_call_id", compatURL, provider.ChatRequest{Messages: []provider.Message{
		{Role: "developer", Content: "x"}, {Role: provider.RoleTool, Content: "r"}}},
		map[string]any{"/messages/0/role": "user", "/messages/1/tool_call_id": ""}},
	{"edge_no_messages", compatURL, provider.ChatRequest{}, map[string]any{"/messages": []any{}}},
}

// TestRequestBodiesMatchGolden builds each case's request through Chat and
// the SDK client, captures the body at the HTTP transport and compares it
// semantically with the golden file: the wire body must not drift.
func TestRequestBodiesMatchGolden(t *testing.T) {
	for _, tc := range requestCases {
		t.Run(tc.name, func(t *testing.T) {
			capture := &pt.Capture{}
			o := newOpenAI(nil, &http.Client{Transport: capture})
			cfg, err := json.Marshal(upstream.Config{BaseURL: tc.baseURL, APIKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Configure(context.Background(), base.Config{ConfigJSON: cfg, APIVersion: 2}, nil); err != nil {
				t.Fatal(err)
			}
			req := tc.req
			req.RequestID = "turn-golden"
			if err := o.Chat(context.Background(), req, func(provider.Event) error { return nil }); err == nil {
				t.Fatal("the capture answers 400, Chat returned no error")
			}
			bodies := capture.Bodies()
			if len(bodies) != 1 {
				t.Fatalf("%d requests, want 1", len(bodies))
			}
			pt.GoldenJSON(t, filepath.Join("testdata", "requests", tc.name+".json"), bodies[0], tc.accept, *updateGolden)
		})
	}
}
