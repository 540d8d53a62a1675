package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	pt "github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

const testKey = "sk-ant-api03-test-secret-7f6e5d"

var chatReq = provider.ChatRequest{RequestID: "turn-1", MaxTokens: 1024, System: "be brief", CacheSystem: true,
	Messages: []provider.Message{{Role: provider.RoleUser, Content: "read a.go and b.go"}},
	Tools:    []provider.ToolSpec{{Name: "fs.read", Description: "read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}}

const reqID = "req_011CSHoEeqs5C35K2UUqR7Fy"

func cfgJSON(t testing.TB, baseURL string) []byte {
	// Small bounded backoff: retried cases finish in milliseconds, and a
	// retry-after over 100 ms is handed back instead of waited for.
	b, err := json.Marshal(upstream.Config{BaseURL: baseURL, APIKey: testKey, Retry: upstream.RetryConfig{InitialMS: 5, MaxMS: 20, MaxWaitMS: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func inProcess(t *testing.T, srv *pt.Server) provider.Client {
	t.Helper()
	impl := newAnthropic(nil, upstream.NewHTTPClient(func(string) string { return "" }))
	c, _ := plugin.TestPluginGRPCConn(t, false, provider.PluginSets(impl, []int{2})[2])
	t.Cleanup(func() { c.Close() })
	raw, err := c.Dispense(provider.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	pc := raw.(provider.Client)
	if err := pc.Configure(context.Background(), base.Config{ConfigJSON: cfgJSON(t, srv.URL()), APIVersion: 2}, nil); err != nil {
		t.Fatal(err)
	}
	return pc
}

type outcome struct {
	res provider.Result
	err error
}

func run(ctx context.Context, c provider.Client, req provider.ChatRequest) outcome {
	turn := provider.NewTurn()
	var o outcome
	o.err = c.Chat(ctx, req, func(e provider.Event) { _ = turn.Add(e) })
	o.res = turn.Result()
	return o
}

func args(t *testing.T, c provider.ToolCallEnd) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(c.Arguments, &m); err != nil {
		t.Fatalf("arguments of %s: %v", c.CallID, err)
	}
	return m
}

func wantErr(t *testing.T, o outcome, code string, retryable bool, status int) *uerr.Error {
	t.Helper()
	ue, ok := uerr.As(o.err)
	if !ok || ue.Code != code {
		t.Fatalf("error %v, want code %s", o.err, code)
	}
	ri := provider.RetryOf(ue)
	if ri.Retryable != retryable || ri.HTTPStatus != status {
		t.Fatalf("retry info %+v, want retryable=%v status=%d", ri, retryable, status)
	}
	if strings.Contains(ue.Error(), testKey) {
		t.Fatalf("the API key leaked into an error: %s", ue.Error())
	}
	if o.res.Done != nil {
		t.Fatal("a failed turn also ended with done")
	}
	return ue
}

var anthropicCases = []struct {
	name   string
	script pt.Script
	check  func(t *testing.T, o outcome)
}{
	{"text", pt.AnthropicStream(0, pt.AnthropicStart(25, 0, 0), pt.AnthropicTextStart(0), pt.AnthropicPing, pt.AnthropicText(0, "Hel"), pt.AnthropicText(0, "lo!"),
		pt.AnthropicBlockStop(0), pt.AnthropicDelta("end_turn", 15), pt.AnthropicStop),
		func(t *testing.T, o outcome) {
			if o.err != nil || o.res.Text != "Hello!" {
				t.Fatalf("%+v %v", o.res, o.err)
			}
			d := o.res.Done
			if d.StopReason != provider.StopEndTurn || d.Model != pt.AnthropicModel || d.UpstreamRequestID != reqID {
				t.Fatalf("done %+v", d)
			}
			if o.res.Usage != (provider.Usage{InputTokens: 25, OutputTokens: 15}) {
				t.Fatalf("usage %+v", o.res.Usage)
			}
		}},
	{"text cut mid-JSON", pt.AnthropicStream(9, pt.AnthropicStart(25, 0, 0), pt.AnthropicTextStart(0), pt.AnthropicText(0, "Hel"), pt.AnthropicText(0, "lo\n\"x\""),
		pt.AnthropicBlockStop(0), pt.AnthropicDelta("end_turn", 15), pt.AnthropicStop),
		func(t *testing.T, o outcome) {
			if o.err != nil || o.res.Text != "Hello\n\"x\"" {
				t.Fatalf("%q %v", o.res.Text, o.err)
			}
		}},
	{"thinking then tool call with split input_json_delta", pt.AnthropicStream(0, pt.AnthropicStart(500, 0, 0),
		pt.AnthropicThinkingStart(0), pt.AnthropicThinking(0, "I should "), pt.AnthropicThinking(0, "read it."), pt.AnthropicSignature(0, "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"), pt.AnthropicBlockStop(0),
		pt.AnthropicTextStart(1), pt.AnthropicText(1, "Reading."), pt.AnthropicBlockStop(1),
		pt.AnthropicToolStart(2, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "fs_read"), pt.AnthropicToolArgs(2, ""), pt.AnthropicToolArgs(2, `{"pa`), pt.AnthropicToolArgs(2, `th": "a.go"}`), pt.AnthropicBlockStop(2),
		pt.AnthropicDelta("tool_use", 89), pt.AnthropicStop),
		func(t *testing.T, o outcome) {
			if o.err != nil || len(o.res.ToolCalls) != 1 || o.res.Text != "Reading." {
				t.Fatalf("%+v %v", o.res, o.err)
			}
			if len(o.res.Reasoning) != 1 || o.res.Reasoning[0].Text != "I should read it." || o.res.Reasoning[0].Signature != "EqQBCgIYAhIM1gbcDa9GJwZA2b3h" {
				t.Fatalf("reasoning %+v", o.res.Reasoning)
			}
			c := o.res.ToolCalls[0]
			if c.CallID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" || c.Name != "fs.read" || string(c.Arguments) != `{"path": "a.go"}` || o.res.Done.StopReason != provider.StopToolUse {
				t.Fatalf("call %+v done %+v", c, o.res.Done)
			}
		}},
	{"redacted thinking", pt.AnthropicStream(0, pt.AnthropicStart(5, 0, 0),
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgBEgy3va3pzix\"}}\n\n",
		pt.AnthropicBlockStop(0), pt.AnthropicTextStart(1), pt.AnthropicText(1, "ok"), pt.AnthropicBlockStop(1), pt.AnthropicDelta("end_turn", 3), pt.AnthropicStop),
		func(t *testing.T, o outcome) {
			if o.err != nil || o.res.Text != "ok" || len(o.res.Reasoning) != 1 || string(o.res.Reasoning[0].Redacted) != "EmwKAhgBEgy3va3pzix" {
				t.Fatalf("%+v %v", o.res, o.err)
			}
		}},
	{"two parallel tool calls", pt.AnthropicStream(0, pt.AnthropicStart(500, 0, 0),
		pt.AnthropicToolStart(0, "toolu_a", "fs_read"), pt.AnthropicToolArgs(0, `{"path":"a.go"}`), pt.AnthropicBlockStop(0),
		pt.AnthropicToolStart(1, "toolu_b", "fs_read"), pt.AnthropicToolArgs(1, `{"path":`), pt.AnthropicToolArgs(1, `"b.go"}`), pt.AnthropicBlockStop(1),
		pt.AnthropicDelta("tool_use", 120), pt.AnthropicStop),
		func(t *testing.T, o outcome) {
			if o.err != nil || len(o.res.ToolCalls) != 2 || args(t, o.res.ToolCalls[0])["path"] != "a.go" || args(t, o.res.ToolCalls[1])["path"] != "b.go" {
				t.Fatalf("%+v %v", o.res, o.err)
			}
		}},
	{"tool call without input", pt.AnthropicStream(0, pt.AnthropicStart(5, 0, 0), pt.AnthropicToolStart(0, "toolu_x", "fs_read"), pt.AnthropicToolArgs(0, ""), pt.AnthropicBlockStop(0), pt.AnthropicDelta("tool_use", 9), pt.AnthropicStop),
		func(t *testing.T, o outcome) {
			if o.err != nil || len(o.res.ToolCalls) != 1 || string(o.res.ToolCalls[0].Arguments) != "{}" || o.res.ToolCalls[0].Invalid != nil {
				t.Fatalf("%+v %v", o.res, o.err)
			}
		}},
	{"usage with cache", pt.AnthropicStream(0, pt.AnthropicStart(40, 1200, 3000), pt.AnthropicTextStart(0), pt.AnthropicText(0, "ok"), pt.AnthropicBlockStop(0), pt.AnthropicDelta("end_turn", 7), pt.AnthropicStop),
		func(t *testing.T, o outcome) {
			if o.err != nil || o.res.Usage != (provider.Usage{InputTokens: 40, OutputTokens: 7, CacheWriteTokens: 1200, CacheReadTokens: 3000}) {
				t.Fatalf("usage %+v %v", o.res.Usage, o.err)
			}
		}},
	{"max_tokens cuts a call off", pt.AnthropicStream(0, pt.AnthropicStart(5, 0, 0), pt.AnthropicToolStart(0, "toolu_x", "fs_read"), pt.AnthropicToolArgs(0, `{"path": "a`), pt.AnthropicBlockStop(0), pt.AnthropicDelta("max_tokens", 1024), pt.AnthropicStop),
		func(t *testing.T, o outcome) {
			if o.err != nil || len(o.res.ToolCalls) != 1 || o.res.ToolCalls[0].Invalid == nil || o.res.Done.StopReason != provider.StopMaxTokens {
				t.Fatalf("%+v %v", o.res, o.err)
			}
		}},
	{"401", pt.AnthropicError(401, "authentication_error", "invalid x-api-key", nil),
		func(t *testing.T, o outcome) {
			ue := wantErr(t, o, provider.CodeAuth, false, 401)
			if !strings.Contains(ue.Fix, "ANTHROPIC_API_KEY") || provider.RetryOf(ue).UpstreamRequestID != reqID {
				t.Fatalf("%+v", ue)
			}
		}},
	{"429 with retry-after", pt.AnthropicError(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", map[string]string{"Retry-After": "7"}),
		func(t *testing.T, o outcome) {
			if ue := wantErr(t, o, provider.CodeRateLimited, true, 429); provider.RetryOf(ue).After != 7*time.Second {
				t.Fatalf("after %v", provider.RetryOf(ue).After)
			}
		}},
	{"500", pt.AnthropicError(500, "api_error", "Internal server error", nil),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeUpstream, true, 500) }},
	{"529 overloaded, x-should-retry false", pt.AnthropicError(529, "overloaded_error", "Overloaded", map[string]string{"X-Should-Retry": "false"}),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeOverloaded, false, 529) }},
	{"prompt too long", pt.AnthropicError(400, "invalid_request_error", "prompt is too long: 208553 tokens > 200000 maximum", nil),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeContextLength, false, 400) }},
	{"overloaded mid-stream", pt.AnthropicStream(0, pt.AnthropicStart(25, 0, 0), pt.AnthropicTextStart(0), pt.AnthropicText(0, "par"), pt.AnthropicStreamError("overloaded_error", "Overloaded")),
		func(t *testing.T, o outcome) {
			wantErr(t, o, provider.CodeOverloaded, true, 0)
			if o.res.Text != "par" {
				t.Fatalf("text before the error %q", o.res.Text)
			}
		}},
	{"an error object as a whole JSON body", pt.Script{Header: map[string]string{"Content-Type": "application/json"}, Chunks: []string{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}},
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeOverloaded, true, 0) }},
	{"a JSON body that is not a message", pt.Script{Header: map[string]string{"Content-Type": "application/json"}, Chunks: []string{`{"models":[]}`}},
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamMalformed, false, 0) }},
	{"truncated: no message_stop", pt.AnthropicStream(0, pt.AnthropicStart(25, 0, 0), pt.AnthropicTextStart(0), pt.AnthropicText(0, "Hel"), pt.AnthropicBlockStop(0), pt.AnthropicDelta("end_turn", 3)),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamIncomplete, true, 0) }},
	{"truncated mid-event", pt.AnthropicStream(0, pt.AnthropicStart(25, 0, 0), "event: content_block_start\ndata: {\"type\":\"content_blo"),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamIncomplete, true, 0) }},
	{"malformed event", pt.AnthropicStream(0, pt.AnthropicStart(25, 0, 0), "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\n\n", pt.AnthropicStop),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamMalformed, false, 0) }},
	{"delta for a block never opened", pt.AnthropicStream(0, pt.AnthropicStart(25, 0, 0), pt.AnthropicText(3, "x"), pt.AnthropicStop),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamMalformed, false, 0) }},
	{"oversized event", pt.AnthropicStream(0, pt.AnthropicStart(25, 0, 0), "data: "+strings.Repeat("x", upstream.MaxEventBytes+10)+"\n\n"),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamMalformed, false, 0) }},
}

func TestAnthropicStreams(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	for _, tc := range anthropicCases {
		t.Run(tc.name, func(t *testing.T) {
			srv.Play(tc.script)
			tc.check(t, run(context.Background(), c, chatReq))
		})
	}
}

// block is a content block as the test reads it off the wire.
type block struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	IsError      bool            `json:"is_error"`
	Signature    string          `json:"signature"`
	CacheControl *struct {
		Type string `json:"type"`
	} `json:"cache_control"`
}

func TestAnthropicRequestOnTheWire(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	srv.Play(pt.AnthropicStream(0, pt.AnthropicStart(5, 0, 0), pt.AnthropicDelta("end_turn", 1), pt.AnthropicStop))
	req := chatReq
	req.Messages = append(append([]provider.Message(nil), chatReq.Messages...),
		provider.Message{Role: provider.RoleAssistant, Reasoning: []provider.ReasoningBlock{{Text: "hm", Signature: "sig1"}}, Content: "Reading.",
			ToolCalls: []provider.ToolCall{{ID: "toolu_1", Name: "fs.read", Arguments: json.RawMessage(`{"path":"a.go"}`)}, {ID: "toolu_2", Name: "fs.read", Arguments: json.RawMessage(`{"path":"b.go"}`)}}},
		provider.Message{Role: provider.RoleTool, ToolCallID: "toolu_1", Content: "package a"},
		provider.Message{Role: provider.RoleTool, ToolCallID: "toolu_2", Content: "no such file", IsError: true, CacheBreakpoint: true})
	if o := run(context.Background(), c, req); o.err != nil {
		t.Fatal(o.err)
	}
	rs := srv.Requests()
	r := rs[len(rs)-1]
	if r.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != testKey || r.Header.Get("Anthropic-Version") != anthropicVersion || r.Header.Get("Authorization") != "" {
		t.Fatalf("request %s %v", r.Path, r.Header)
	}
	var body struct {
		Model     string  `json:"model"`
		MaxTokens int     `json:"max_tokens"`
		Stream    bool    `json:"stream"`
		System    []block `json:"system"`
		Messages  []struct {
			Role    string  `json:"role"`
			Content []block `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != defaultModel || body.MaxTokens != 1024 || !body.Stream || len(body.System) != 1 || body.System[0].CacheControl == nil || body.Tools[0].Name != "fs_read" {
		t.Fatalf("body %s", r.Body)
	}
	if len(body.Messages) != 3 {
		t.Fatalf("messages (tool results merged into one user message) %s", r.Body)
	}
	as, tr := body.Messages[1], body.Messages[2]
	if as.Role != "assistant" || len(as.Content) != 4 || as.Content[0].Type != "thinking" || as.Content[0].Signature != "sig1" || as.Content[2].Name != "fs_read" || string(as.Content[3].Input) != `{"path":"b.go"}` {
		t.Fatalf("assistant %+v", as)
	}
	if tr.Role != "user" || len(tr.Content) != 2 || tr.Content[0].ToolUseID != "toolu_1" || !tr.Content[1].IsError || tr.Content[1].CacheControl == nil {
		t.Fatalf("tool results %+v", tr)
	}
}

func cancelMidStream(t *testing.T, ctx context.Context, srv *pt.Server, c provider.Client) {
	srv.Play(pt.Script{Header: map[string]string{"Content-Type": "text/event-stream"}, Chunks: []string{pt.AnthropicStart(5, 0, 0), pt.AnthropicTextStart(0), pt.AnthropicText(0, "tick")}, Hang: true})
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cancelled time.Time
	err := c.Chat(cctx, chatReq, func(e provider.Event) {
		if e.TextDelta != "" && cancelled.IsZero() {
			cancelled = time.Now()
			cancel()
		}
	})
	if err == nil || cancelled.IsZero() {
		t.Fatalf("cancelled chat: err=%v, delta seen=%v", err, !cancelled.IsZero())
	}
	select {
	case <-srv.Closed():
		t.Logf("upstream request closed %s after cancel", time.Since(cancelled).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream request stayed open after the call was cancelled")
	}
}

func TestAnthropicCancelMidStream(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	cancelMidStream(t, context.Background(), srv, inProcess(t, srv))
}

// TestAnthropicInDockerSandbox runs the real plugin binary in its
// ai-provider container, reaching the fake on the host's loopback only
// through the kernel's CONNECT proxy.
func TestAnthropicInDockerSandbox(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	e := kerneltest.StartProvider(t, "builtin-plugins/provider-anthropic", cfgJSON(t, srv.URL()), srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := e.Provider(ctx, pluginName, func(ctx context.Context, c provider.Client) error {
		for _, tc := range anthropicCases {
			if tc.name == "oversized event" {
				continue
			}
			srv.Play(tc.script)
			t.Run(tc.name, func(t *testing.T) { tc.check(t, run(ctx, c, chatReq)) })
		}
		cancelMidStream(t, ctx, srv, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAnthropicRetries: what is retried (counted at the fake) and what is
// not, x-should-retry included, with the small backoff of cfgJSON.
func TestAnthropicRetries(t *testing.T) {
	ok := pt.AnthropicStream(0, pt.AnthropicStart(5, 0, 0), pt.AnthropicTextStart(0), pt.AnthropicText(0, "ok"), pt.AnthropicBlockStop(0), pt.AnthropicDelta("end_turn", 1), pt.AnthropicStop)
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	for _, tc := range []struct {
		name     string
		scripts  []pt.Script
		requests int
		check    func(t *testing.T, o outcome)
	}{
		{"529 overloaded then success", []pt.Script{pt.AnthropicError(529, "overloaded_error", "Overloaded", nil), ok}, 2, nil},
		{"429 with retry-after-ms then success", []pt.Script{pt.AnthropicError(429, "rate_limit_error", "rate limited", map[string]string{"Retry-After-Ms": "30"}), ok}, 2, nil},
		{"x-should-retry true forces a retry of a 400", []pt.Script{pt.AnthropicError(400, "invalid_request_error", "try again", map[string]string{"X-Should-Retry": "true"}), ok}, 2, nil},
		{"x-should-retry false forbids retrying a 529", []pt.Script{pt.AnthropicError(529, "overloaded_error", "Overloaded", map[string]string{"X-Should-Retry": "false"}), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeOverloaded, false, 529) }},
		{"connection reset before the first byte", []pt.Script{{Reset: true}, ok}, 2, nil},
		{"overloaded_error before any output is retried", []pt.Script{pt.AnthropicStream(0, pt.AnthropicStart(5, 0, 0), pt.AnthropicStreamError("overloaded_error", "Overloaded")), ok}, 2, nil},
		{"never after a tool call was delivered", []pt.Script{pt.AnthropicStream(0, pt.AnthropicStart(5, 0, 0), pt.AnthropicToolStart(0, "toolu_a", "fs_read"), pt.AnthropicStreamError("overloaded_error", "Overloaded")), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeOverloaded, true, 0) }},
		{"spend cap is not retried", []pt.Script{pt.AnthropicError(429, "rate_limit_error", "Your credit balance is too low; check your billing settings.", nil), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeQuota, false, 429) }},
		{"403 is not retried", []pt.Script{pt.AnthropicError(403, "permission_error", "no access", nil), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeForbidden, false, 403) }},
		{"prompt too long is not retried", []pt.Script{pt.AnthropicError(400, "invalid_request_error", "prompt is too long: 208553 tokens > 200000 maximum", nil), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeContextLength, false, 400) }},
		{"500 every time: 1 + 2 retries", []pt.Script{pt.AnthropicError(500, "api_error", "Internal server error", nil)}, 3,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeUpstream, true, 500) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.Requests())
			srv.Play(tc.scripts...)
			o := run(context.Background(), c, chatReq)
			if n := len(srv.Requests()) - before; n != tc.requests {
				t.Fatalf("%d requests, want %d (%v)", n, tc.requests, o.err)
			}
			if tc.check != nil {
				tc.check(t, o)
			} else if o.err != nil || o.res.Text != "ok" {
				t.Fatalf("%+v %v", o.res, o.err)
			}
		})
	}
}
