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
// the SDK's typed params (commit "provider-anthropic: golden request
// bodies from the hand-built JSON"); do not regenerate them to make a
// drift pass.
var updateGolden = flag.Bool("update-golden", false, "rewrite the golden request bodies")

func temp(f float64) *float64 { return &f }

var readTool = provider.ToolSpec{Name: "fs.read", Description: "read a file",
	Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","maxLength":4096}},"required":["path"],"additionalProperties":false,"$defs":{"n":{"type":"integer"}}}`)}

// execTool has neither description nor parameters: the builder sends an
// empty object schema.
var execTool = provider.ToolSpec{Name: "shell.exec"}

// toolLoop: thinking (signed and redacted, sent back unchanged), text and
// parallel tool calls; tool results (one an error, one empty) merged into
// one user message with the next user text; cache breakpoints.
var toolLoop = []provider.Message{
	{Role: provider.RoleUser, Content: "read a.go and b.go, then run the tests", CacheBreakpoint: true},
	{Role: provider.RoleAssistant, Content: "Reading both.",
		Reasoning: []provider.ReasoningBlock{
			{Text: "The user wants two files.\nRead them in parallel.", Signature: "EqQBCkgIARABGAIiQL+/sig==\u002b/"},
			{Redacted: []byte("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP")}},
		ToolCalls: []provider.ToolCall{
			{ID: "toolu_01A", Name: "fs.read", Arguments: json.RawMessage(`{"path":"a.go"}`)},
			{ID: "toolu_01B", Name: "fs.read", Arguments: json.RawMessage(`{"path": "b.go", "n": 1.50}`)}}},
	{Role: provider.RoleTool, ToolCallID: "toolu_01A", Content: "package a\n"},
	{Role: provider.RoleTool, ToolCallID: "toolu_01B", Content: "no such file: b.go", IsError: true},
	{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "toolu_01C", Name: "shell.exec"}}},
	{Role: provider.RoleTool, ToolCallID: "toolu_01C", Content: "", CacheBreakpoint: true},
	{Role: provider.RoleUser, Content: "and now?"},
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
	{"system_cached", defaultBaseURL, provider.ChatRequest{MaxTokens: 1024, System: "be brief", CacheSystem: true, Messages: user}, nil},
	{"default_max_tokens", "https://llm.internal/v1", provider.ChatRequest{Model: "claude-opus-4-1", System: "be brief", Messages: user, Temperature: temp(0)}, nil},
	{"thinking_tool_loop", defaultBaseURL, provider.ChatRequest{MaxTokens: 16000, System: "you are a coder", CacheSystem: true, CacheTools: true,
		Temperature: temp(1), Reasoning: &provider.Reasoning{Effort: "high", BudgetTokens: 8000},
		Messages: toolLoop, Tools: []provider.ToolSpec{readTool, execTool}}, nil},
	{"choice_none", defaultBaseURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool}, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceNone}, DisableParallelToolCalls: true}, nil},
	{"choice_required", defaultBaseURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool}, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceRequired}, DisableParallelToolCalls: true}, nil},
	{"choice_auto", defaultBaseURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool}, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceAuto}}, nil},
	{"choice_default_no_parallel", defaultBaseURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool}, DisableParallelToolCalls: true}, nil},
	{"choice_tool", defaultBaseURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{readTool, execTool}, CacheTools: true, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceTool, Name: "shell.exec"}}, nil},
	{"choice_without_tools", defaultBaseURL, provider.ChatRequest{Messages: user, ToolChoice: provider.ToolChoice{Mode: provider.ToolChoiceRequired}}, nil},
	{"system_messages", defaultBaseURL, provider.ChatRequest{System: "be brief", Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "one"},
		{Role: provider.RoleSystem, Content: "from the kernel"},
		{Role: provider.RoleAssistant},
		{Role: provider.RoleUser, Content: "two"}}}, nil},
	// Schemas without the typed form's shape go as declared.
	{"schemas_without_typed_form", defaultBaseURL, provider.ChatRequest{Messages: user, Tools: []provider.ToolSpec{
		{Name: "no.type", Parameters: json.RawMessage(`{"properties":{"a":{"type":"string"}}}`)},
		{Name: "odd.required", Parameters: json.RawMessage(`{"type":"object","required":"a"}`)},
		{Name: "not.object", Parameters: json.RawMessage(`true`)}}}, nil},
	// Deliberate differences, none reachable with a valid conversation:
	// required strings the old builder omitted when empty are sent as ""
	// (the SDK's encoding; the API refuses both forms), and a cache
	// breakpoint on a turn that ends in a thinking block, which cannot
	// carry cache_control (the API refused the old form), is dropped.
	{"edge_empty_required_strings", defaultBaseURL, provider.ChatRequest{Messages: []provider.Message{
		{Role: provider.RoleUser},
		{Role: provider.RoleAssistant, Reasoning: []provider.ReasoningBlock{{Text: "unsigned"}}, ToolCalls: []provider.ToolCall{{Name: "x"}}},
		{Role: provider.RoleTool, Content: "r"}}},
		map[string]any{"/messages/0/content/0/text": "", "/messages/1/content/0/signature": "", "/messages/1/content/1/id": "", "/messages/2/content/0/tool_use_id": ""}},
	{"edge_cache_on_thinking", defaultBaseURL, provider.ChatRequest{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: "q"},
		{Role: provider.RoleAssistant, Reasoning: []provider.ReasoningBlock{{Text: "t", Signature: "s"}}, CacheBreakpoint: true}}},
		map[string]any{"/messages/1/content/0/cache_control": pt.Absent}},
}

// TestRequestBodiesMatchGolden builds each case's request through Chat and
// the SDK client, captures the body at the HTTP transport and compares it
// semantically with the golden file: the wire body must not drift.
func TestRequestBodiesMatchGolden(t *testing.T) {
	for _, tc := range requestCases {
		t.Run(tc.name, func(t *testing.T) {
			capture := &pt.Capture{}
			a := newAnthropic(nil, &http.Client{Transport: capture})
			cfg, err := json.Marshal(upstream.Config{BaseURL: tc.baseURL, APIKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Configure(context.Background(), base.Config{ConfigJSON: cfg, APIVersion: 2}, nil); err != nil {
				t.Fatal(err)
			}
			req := tc.req
			req.RequestID = "turn-golden"
			if err := a.Chat(context.Background(), req, func(provider.Event) error { return nil }); err == nil {
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
