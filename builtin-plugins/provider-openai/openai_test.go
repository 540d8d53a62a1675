package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
	pt "github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

const testKey = "sk-test-9f8e7d6c5b4a-secret"

var chatReq = provider.ChatRequest{RequestID: "turn-1", MaxTokens: 256, System: "be brief",
	Messages: []provider.Message{{Role: provider.RoleUser, Content: "read a.go and b.go"}},
	Tools:    []provider.ToolSpec{{Name: "fs.read", Description: "read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}}

func cfgJSON(t testing.TB, baseURL string) []byte {
	// Small bounded backoff: retried cases finish in milliseconds, and a
	// retry-after over 100 ms is handed back instead of waited for.
	b, err := json.Marshal(upstream.Config{BaseURL: baseURL, APIKey: testKey, Retry: upstream.RetryConfig{InitialMS: 5, MaxMS: 20, MaxWaitMS: 100}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// inProcess serves the plugin over real gRPC (API v2) in this process,
// dialling the fake directly (no sandbox, so no proxy).
func inProcess(t *testing.T, srv *pt.Server) provider.Client {
	t.Helper()
	impl := newOpenAI(nil, upstream.NewHTTPClient(func(string) string { return "" }))
	c, _ := plugin.TestPluginGRPCConn(t, false, provider.PluginSets(impl, []int{2})[2])
	t.Cleanup(func() { c.Close() })
	raw, err := c.Dispense(provider.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	pc := raw.(provider.Client)
	if err := pc.Configure(context.Background(), base.Config{ConfigJSON: cfgJSON(t, srv.URL()+"/v1"), APIVersion: 2}, nil); err != nil {
		t.Fatal(err)
	}
	return pc
}

type outcome struct {
	res    provider.Result
	err    error
	events int
}

func run(ctx context.Context, c provider.Client, req provider.ChatRequest) outcome {
	turn := provider.NewTurn()
	var o outcome
	o.err = c.Chat(ctx, req, func(e provider.Event) { o.events++; _ = turn.Add(e) })
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
		t.Fatalf("a failed turn also ended with done")
	}
	return ue
}

var openAICases = []struct {
	name   string
	script pt.Script
	check  func(t *testing.T, o outcome)
}{
	{"text", pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("Hel"), pt.OpenAIText("lo"), pt.OpenAIText("!"), pt.OpenAIFinish("stop"), pt.OpenAIUsageChunk(19, 3, 0, 0), pt.OpenAIDone),
		func(t *testing.T, o outcome) {
			if o.err != nil || o.res.Text != "Hello!" || len(o.res.ToolCalls) != 0 {
				t.Fatalf("%+v %v", o.res, o.err)
			}
			d := o.res.Done
			if d == nil || d.StopReason != provider.StopEndTurn || d.RawStopReason != "stop" || d.Model != pt.OpenAIModel || d.UpstreamRequestID != "req_5e2d9a1c44" {
				t.Fatalf("done %+v", d)
			}
			if o.res.Usage != (provider.Usage{InputTokens: 19, OutputTokens: 3}) {
				t.Fatalf("usage %+v", o.res.Usage)
			}
		}},
	{"text cut mid-JSON", pt.Stream(7, pt.OpenAIRole, pt.OpenAIText("Hel"), pt.OpenAIText("lo\n\"x\""), pt.OpenAIFinish("stop"), pt.OpenAIUsageChunk(19, 3, 0, 0), pt.OpenAIDone),
		func(t *testing.T, o outcome) {
			if o.err != nil || o.res.Text != "Hello\n\"x\"" {
				t.Fatalf("%q %v", o.res.Text, o.err)
			}
		}},
	{"tool call with split argument deltas", pt.Stream(0, pt.OpenAICallStart(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "fs_read"),
		pt.OpenAICallArgs(0, `{"`), pt.OpenAICallArgs(0, `path`), pt.OpenAICallArgs(0, `":"`), pt.OpenAICallArgs(0, `a.go`), pt.OpenAICallArgs(0, `"}`),
		pt.OpenAIFinish("tool_calls"), pt.OpenAIUsageChunk(80, 17, 0, 0), pt.OpenAIDone),
		func(t *testing.T, o outcome) {
			if o.err != nil || len(o.res.ToolCalls) != 1 {
				t.Fatalf("%+v %v", o.res, o.err)
			}
			c := o.res.ToolCalls[0]
			if c.CallID != "call_DdmO9pD3xa9XTPNJ32zg2hcA" || c.Name != "fs.read" || string(c.Arguments) != `{"path":"a.go"}` || c.Invalid != nil {
				t.Fatalf("call %+v", c)
			}
			if o.res.Done.StopReason != provider.StopToolUse {
				t.Fatalf("stop %+v", o.res.Done)
			}
		}},
	{"two parallel tool calls", pt.Stream(0, pt.OpenAICallStart(0, "call_a1", "fs_read"), pt.OpenAICallArgs(0, `{"path":`), pt.OpenAICallArgs(0, ` "a.go"}`),
		pt.OpenAICallStart(1, "call_b2", "fs_read"), pt.OpenAICallArgs(1, `{"path": "b.go"}`), pt.OpenAIFinish("tool_calls"), pt.OpenAIUsageChunk(80, 40, 0, 0), pt.OpenAIDone),
		func(t *testing.T, o outcome) {
			if o.err != nil || len(o.res.ToolCalls) != 2 {
				t.Fatalf("%+v %v", o.res, o.err)
			}
			a, b := o.res.ToolCalls[0], o.res.ToolCalls[1]
			if a.CallID != "call_a1" || args(t, a)["path"] != "a.go" || b.CallID != "call_b2" || args(t, b)["path"] != "b.go" {
				t.Fatalf("calls %+v", o.res.ToolCalls)
			}
		}},
	{"usage with cached and reasoning tokens", pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("ok"), pt.OpenAIFinish("stop"), pt.OpenAIUsageChunk(1000, 50, 600, 20), pt.OpenAIDone),
		func(t *testing.T, o outcome) {
			if o.err != nil || o.res.Usage != (provider.Usage{InputTokens: 400, OutputTokens: 50, CacheReadTokens: 600, ReasoningTokens: 20}) {
				t.Fatalf("usage %+v %v", o.res.Usage, o.err)
			}
		}},
	{"quirks: ids, null args, index from 1, repeated name, keep-alives, finish twice", pt.Stream(0, ": keep-alive\n\n",
		pt.OpenAIChunk(`{"role":"assistant","content":null,"tool_calls":[{"index":1,"id":"functions.fs_read:0","type":"function","function":{"name":"fs_read","arguments":null}}]}`, "null"),
		pt.OpenAIChunk(`{"tool_calls":[{"index":1,"function":{"name":"fs_read","arguments":"{\"path\":\"x\"}"}}]}`, "null"),
		pt.OpenAIChunk(`{"tool_calls":[{"index":1,"id":"0","type":"function","function":{"name":"fs_read"}}]}`, "null"),
		pt.OpenAIChunk(`{"tool_calls":[{"index":2,"type":"function","function":{"name":"fs_read","arguments":{"path":"z"}}}]}`, "null"),
		": ping\n\n",
		pt.OpenAIChunk(`{}`, `"tool_calls"`), pt.OpenAIChunk(`{}`, `"tool_calls"`), pt.OpenAIDone),
		func(t *testing.T, o outcome) {
			if o.err != nil || len(o.res.ToolCalls) != 3 {
				t.Fatalf("%+v %v", o.res, o.err)
			}
			c0, c1, c2 := o.res.ToolCalls[0], o.res.ToolCalls[1], o.res.ToolCalls[2]
			if c0.CallID != "functions.fs_read:0" || c0.Name != "fs.read" || args(t, c0)["path"] != "x" {
				t.Fatalf("call 0 %+v", c0)
			}
			if c1.CallID != "0" || string(c1.Arguments) != "{}" || c1.Invalid != nil {
				t.Fatalf("call 1 (no arguments: {}) %+v", c1)
			}
			if !strings.HasPrefix(c2.CallID, "call_") || args(t, c2)["path"] != "z" {
				t.Fatalf("call 2 (no id, object arguments) %+v", c2)
			}
		}},
	{"reasoning kept apart (reasoning_content, reasoning, content parts)", pt.Stream(0, pt.OpenAIRole,
		pt.OpenAIChunk(`{"reasoning_content":"think "}`, "null"), pt.OpenAIChunk(`{"reasoning":"more "}`, "null"),
		pt.OpenAIChunk(`{"content":[{"type":"thinking","thinking":"deep"},{"type":"text","text":"Answer"}]}`, "null"),
		pt.OpenAIText("."), pt.OpenAIFinish("stop"), pt.OpenAIDone),
		func(t *testing.T, o outcome) {
			if o.err != nil || o.res.Text != "Answer." || len(o.res.Reasoning) != 1 || o.res.Reasoning[0].Text != "think more deep" {
				t.Fatalf("%+v %v", o.res, o.err)
			}
		}},
	{"top-level error field on an ordinary chunk", pt.Stream(0, pt.OpenAIRole, "data: {\"id\":\"x\",\"choices\":[],\"error\":{\"message\":\"upstream model crashed\",\"type\":\"server_error\"}}\n\n", pt.OpenAIDone),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeUpstream, true, 0) }},
	{"whole call, finish and usage in one chunk", pt.Stream(0,
		"data: {\"id\":\"cmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"qwen2.5-coder\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_q1\",\"type\":\"function\",\"function\":{\"name\":\"fs_read\",\"arguments\":\"{\\\"path\\\":\\\"a.go\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":9}}\n\n",
		pt.OpenAIDone),
		func(t *testing.T, o outcome) {
			if o.err != nil || len(o.res.ToolCalls) != 1 || args(t, o.res.ToolCalls[0])["path"] != "a.go" || o.res.Usage.OutputTokens != 9 || o.res.Done.Model != "qwen2.5-coder" {
				t.Fatalf("%+v %v", o.res, o.err)
			}
		}},
	{"max_tokens cuts a call off", pt.Stream(0, pt.OpenAICallStart(0, "call_x", "fs_read"), pt.OpenAICallArgs(0, `{"path": "a`), pt.OpenAIFinish("length"), pt.OpenAIDone),
		func(t *testing.T, o outcome) {
			if o.err != nil || len(o.res.ToolCalls) != 1 || o.res.ToolCalls[0].Invalid == nil || o.res.Done.StopReason != provider.StopMaxTokens {
				t.Fatalf("%+v %v", o.res, o.err)
			}
		}},
	{"401", pt.OpenAIError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-test-***ecret. You can find your API key at https://platform.openai.com/account/api-keys.", nil),
		func(t *testing.T, o outcome) {
			ue := wantErr(t, o, provider.CodeAuth, false, 401)
			if !strings.Contains(ue.Fix, "OPENAI_API_KEY") || provider.RetryOf(ue).UpstreamRequestID != "req_8c1f0e2b7d" {
				t.Fatalf("%+v", ue)
			}
		}},
	{"429 with Retry-After", pt.OpenAIError(429, "requests", "rate_limit_exceeded", "Rate limit reached for gpt-4.1 on requests per min (RPM): Limit 500, Used 500, Requested 1.", map[string]string{"Retry-After": "2"}),
		func(t *testing.T, o outcome) {
			ue := wantErr(t, o, provider.CodeRateLimited, true, 429)
			if provider.RetryOf(ue).After != 2*time.Second {
				t.Fatalf("retry after %v", provider.RetryOf(ue).After)
			}
		}},
	{"429 quota", pt.OpenAIError(429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota, please check your plan and billing details.", nil),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeQuota, false, 429) }},
	{"500", pt.OpenAIError(500, "server_error", "", "The server had an error while processing your request. Sorry about that!", nil),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeUpstream, true, 500) }},
	{"context length", pt.OpenAIError(400, "invalid_request_error", "context_length_exceeded", "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens.", nil),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeContextLength, false, 400) }},
	{"error event inside a 200 stream", pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("par"), "event: error\ndata: {\"error\":{\"message\":\"The server is overloaded\",\"type\":\"server_error\",\"code\":null}}\n\n"),
		func(t *testing.T, o outcome) {
			wantErr(t, o, provider.CodeUpstream, true, 0)
			if o.res.Text != "par" {
				t.Fatalf("text before the error %q", o.res.Text)
			}
		}},
	{"error data line without [DONE]", pt.Stream(0, pt.OpenAIRole, "data: {\"error\":{\"message\":\"Rate limit exceeded\",\"type\":\"rate_limit_error\",\"code\":429}}\n\n"),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeRateLimited, true, 0) }},
	{"an error object as a whole JSON body", pt.Script{Header: map[string]string{"Content-Type": "application/json"}, Chunks: []string{`{"error":{"message":"model is loading","type":"server_error","code":null}}`}},
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeUpstream, true, 0) }},
	{"a JSON body that is not a completion", pt.Script{Header: map[string]string{"Content-Type": "application/json"}, Chunks: []string{`{"object":"list","data":[]}`}},
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamMalformed, false, 0) }},
	{"truncated: no finish_reason, no [DONE]", pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("Hel"), pt.OpenAIText("lo")),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamIncomplete, true, 0) }},
	{"truncated mid-event", pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("Hel"), `data: {"id":"chatcmpl-BfX3kYl8mQ2","object":"chat.compl`),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamIncomplete, true, 0) }},
	{"malformed chunk", pt.Stream(0, pt.OpenAIRole, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]\n\n", pt.OpenAIDone),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamMalformed, false, 0) }},
	{"oversized line", pt.Stream(0, pt.OpenAIRole, "data: "+strings.Repeat("x", upstream.MaxEventBytes+10)+"\n\n"),
		func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamMalformed, false, 0) }},
}

func TestOpenAIStreams(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	for _, tc := range openAICases {
		t.Run(tc.name, func(t *testing.T) {
			srv.Play(tc.script)
			tc.check(t, run(context.Background(), c, chatReq))
		})
	}
}

func TestOpenAIRequestOnTheWire(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	srv.Play(pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("ok"), pt.OpenAIFinish("stop"), pt.OpenAIDone))
	req := chatReq
	req.Messages = append(append([]provider.Message(nil), chatReq.Messages...),
		provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "fs.read", Arguments: json.RawMessage(`{"path":"a.go"}`)}}},
		provider.Message{Role: provider.RoleTool, ToolCallID: "call_1", Content: "package a"})
	req.ToolChoice = provider.ToolChoice{Mode: provider.ToolChoiceTool, Name: "fs.read"}
	if o := run(context.Background(), c, req); o.err != nil {
		t.Fatal(o.err)
	}
	rs := srv.Requests()
	r := rs[len(rs)-1]
	if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+testKey || r.Header.Get("Accept") != "text/event-stream" {
		t.Fatalf("request %s %v", r.Path, r.Header)
	}
	var body struct {
		Model         string          `json:"model"`
		Stream        bool            `json:"stream"`
		StreamOptions map[string]bool `json:"stream_options"`
		MaxTokens     int             `json:"max_tokens"`
		Messages      []struct {
			Role       string  `json:"role"`
			Content    *string `json:"content"`
			ToolCallID string  `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tools"`
		ToolChoice struct {
			Function struct{ Name string } `json:"function"`
		} `json:"tool_choice"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Model != defaultModel || !body.Stream || !body.StreamOptions["include_usage"] || body.MaxTokens != 256 {
		t.Fatalf("body %s", r.Body)
	}
	if len(body.Messages) != 4 || body.Messages[0].Role != "system" || body.Messages[2].Content != nil || body.Messages[2].ToolCalls[0].Function.Name != "fs_read" ||
		body.Messages[2].ToolCalls[0].Function.Arguments != `{"path":"a.go"}` || body.Messages[3].ToolCallID != "call_1" {
		t.Fatalf("messages %s", r.Body)
	}
	if body.Tools[0].Function.Name != "fs_read" || body.ToolChoice.Function.Name != "fs_read" {
		t.Fatalf("tools %s", r.Body)
	}
}

// cancelMidStream cancels after the first delta of a stream the fake
// keeps open and checks that the upstream request is closed.
func cancelMidStream(t *testing.T, ctx context.Context, srv *pt.Server, c provider.Client) {
	srv.Play(pt.Script{Header: map[string]string{"Content-Type": "text/event-stream"}, Chunks: []string{pt.OpenAIRole, pt.OpenAIText("tick")}, Hang: true})
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

func TestOpenAICancelMidStream(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	cancelMidStream(t, context.Background(), srv, inProcess(t, srv))
}

// TestOpenAIInDockerSandbox runs the real plugin binary in its ai-provider
// container: it reaches the fake on the host's loopback only through the
// kernel's CONNECT proxy (the container has no network interface), which
// allows exactly the fake's host:port.
func TestOpenAIInDockerSandbox(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	e := kerneltest.StartProvider(t, "builtin-plugins/provider-openai", cfgJSON(t, srv.URL()+"/v1"), srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := e.Provider(ctx, pluginName, func(ctx context.Context, c provider.Client) error {
		for _, tc := range openAICases {
			if tc.name == "oversized line" {
				continue // 4 MiB through the container adds nothing the in-process run does not check
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

// TestOpenAIProxyRefusesOtherHosts: the plugin, in its container, is
// allowed host A only; configured for host B it gets a structured denial
// naming B and the config key, and B never sees a request.
func TestOpenAIProxyRefusesOtherHosts(t *testing.T) {
	allowed, other := pt.New(), pt.New()
	defer allowed.Close()
	defer other.Close()
	ws, err := os.MkdirTemp("", "fws")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	os.Chmod(ws, 0o755)
	e := kerneltest.Start(t, ws, kerneltest.Options{Spec: func(s *supervisor.Spec) {
		s.ConfigJSON = cfgJSON(t, other.URL()+"/v1")
		s.Network = []string{allowed.Addr()}
	}}, "builtin-plugins/provider-openai")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var o outcome
	err = e.Provider(ctx, pluginName, func(ctx context.Context, c provider.Client) error {
		o = run(ctx, c, chatReq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ue := wantErr(t, o, provider.CodeNetworkDenied, false, 0)
	if !strings.Contains(ue.What, other.Addr()) || !strings.Contains(ue.Fix, "providers.openai.base_url") {
		t.Fatalf("denial %+v", ue)
	}
	if n := len(other.Requests()); n != 0 {
		t.Fatalf("the refused host got %d requests", n)
	}
}

// TestOpenAIKeyNeverLogged: the plugin's log, at trace level, never holds
// the API key, whatever the turn does.
func TestOpenAIKeyNeverLogged(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	var logs strings.Builder
	var mu sync.Mutex
	impl := newOpenAI(hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: lockedWriter{&mu, &logs}}), upstream.NewHTTPClient(func(string) string { return "" }))
	if err := impl.Configure(context.Background(), base.Config{ConfigJSON: cfgJSON(t, srv.URL()+"/v1")}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range openAICases {
		srv.Play(tc.script)
		_ = impl.Chat(context.Background(), chatReq, func(provider.Event) error { return nil })
	}
	mu.Lock()
	defer mu.Unlock()
	if logs.Len() == 0 || strings.Contains(logs.String(), testKey) {
		t.Fatalf("log (%d bytes) holds the key or nothing at all:\n%s", logs.Len(), logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRecordThenReplay records turns from the fake upstream through this
// plugin with cassette.Writer, then plays the cassette with the real
// provider-replay binary in its container: the same events, byte for byte.
func TestRecordThenReplay(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	var buf bytes.Buffer
	w := cassette.NewWriter(&buf)
	req := chatReq
	var recorded [][]byte
	for i, sc := range []pt.Script{openAICases[3].script, openAICases[0].script} { // two parallel calls, then text
		srv.Play(sc)
		rec := w.Record(req)
		var evs []provider.Event
		if err := c.Chat(context.Background(), req, rec.Observe(func(e provider.Event) { evs = append(evs, e) })); err != nil {
			t.Fatal(err)
		}
		if ok, err := rec.Finish(); !ok || err != nil {
			t.Fatalf("turn %d not recorded: %v", i+1, err)
		}
		j, _ := json.Marshal(evs)
		recorded = append(recorded, j)
		turn := provider.NewTurn()
		for _, e := range evs {
			_ = turn.Add(e)
		}
		req.Messages = append(append([]provider.Message(nil), req.Messages...), turn.Result().AssistantMessage())
		for _, tc := range turn.Result().ToolCalls {
			req.Messages = append(req.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: tc.CallID, Content: "contents of " + string(tc.Arguments)})
		}
	}
	if strings.Contains(buf.String(), testKey) {
		t.Fatal("the cassette holds the API key")
	}
	ws, err := os.MkdirTemp("", "fws")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	os.Chmod(ws, 0o755)
	cfg, _ := json.Marshal(map[string]string{"cassette": buf.String()})
	e := kerneltest.Start(t, ws, kerneltest.Options{Spec: func(s *supervisor.Spec) { s.ConfigJSON = cfg }}, "builtin-plugins/provider-replay")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err = e.Provider(ctx, "provider-replay", func(ctx context.Context, rc provider.Client) error {
		r := chatReq
		for i := range recorded {
			var evs []provider.Event
			if err := rc.Chat(ctx, r, func(e provider.Event) { evs = append(evs, e) }); err != nil {
				return err
			}
			if j, _ := json.Marshal(evs); !bytes.Equal(j, recorded[i]) {
				t.Fatalf("turn %d replayed\n %s\nrecorded\n %s", i+1, j, recorded[i])
			}
			turn := provider.NewTurn()
			for _, e := range evs {
				_ = turn.Add(e)
			}
			r.Messages = append(append([]provider.Message(nil), r.Messages...), turn.Result().AssistantMessage())
			for _, tc := range turn.Result().ToolCalls {
				r.Messages = append(r.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: tc.CallID, Content: "contents of " + string(tc.Arguments)})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpenAIRetries: what is retried (counted at the fake) and what is
// not, with the small backoff of cfgJSON.
func TestOpenAIRetries(t *testing.T) {
	ok := pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("ok"), pt.OpenAIFinish("stop"), pt.OpenAIDone)
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	for _, tc := range []struct {
		name     string
		scripts  []pt.Script
		requests int
		check    func(t *testing.T, o outcome)
	}{
		{"500 then success", []pt.Script{pt.OpenAIError(500, "server_error", "", "oops", nil), ok}, 2, nil},
		{"429 with retry-after-ms then success", []pt.Script{pt.OpenAIError(429, "requests", "rate_limit_exceeded", "Rate limit reached", map[string]string{"Retry-After-Ms": "30"}), ok}, 2, nil},
		{"503 then 502 then success", []pt.Script{pt.OpenAIError(503, "server_error", "", "busy", nil), pt.OpenAIError(502, "server_error", "", "bad gateway", nil), ok}, 3, nil},
		{"connection reset before the first byte", []pt.Script{{Reset: true}, ok}, 2, nil},
		{"500 every time: 1 + 2 retries", []pt.Script{pt.OpenAIError(500, "server_error", "", "oops", nil)}, 3,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeUpstream, true, 500) }},
		{"429 insufficient_quota is not retried", []pt.Script{pt.OpenAIError(429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota, please check your plan and billing details.", nil), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeQuota, false, 429) }},
		{"retry-after beyond the longest wait is handed back", []pt.Script{pt.OpenAIError(429, "requests", "rate_limit_exceeded", "Rate limit reached", map[string]string{"Retry-After": "20"}), ok}, 1,
			func(t *testing.T, o outcome) {
				if ue := wantErr(t, o, provider.CodeRateLimited, true, 429); provider.RetryOf(ue).After != 20*time.Second {
					t.Fatalf("after %v", provider.RetryOf(ue).After)
				}
			}},
		{"401 is not retried", []pt.Script{pt.OpenAIError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided", nil), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeAuth, false, 401) }},
		{"404 model is not retried", []pt.Script{pt.OpenAIError(404, "invalid_request_error", "model_not_found", "The model `gpt-9` does not exist or you do not have access to it.", nil), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeModelNotFound, false, 404) }},
		{"context length is not retried", []pt.Script{pt.OpenAIError(400, "invalid_request_error", "context_length_exceeded", "This model's maximum context length is 128000 tokens.", nil), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeContextLength, false, 400) }},
		{"never after a tool call was delivered", []pt.Script{pt.Stream(0, pt.OpenAICallStart(0, "call_a1", "fs_read"), pt.OpenAICallArgs(0, `{"path":`)), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeStreamIncomplete, false, 0) }},
		{"never after text was delivered", []pt.Script{pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("par"), "event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n"), ok}, 1,
			func(t *testing.T, o outcome) { wantErr(t, o, provider.CodeUpstream, true, 0) }},
		{"an error event before any output is retried", []pt.Script{pt.Stream(0, pt.OpenAIRole, "data: {\"error\":{\"message\":\"Rate limit exceeded\",\"type\":\"rate_limit_error\",\"code\":429}}\n\n"), ok}, 2, nil},
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

// TestOpenAIRetriesSpent: the turn's error says how many requests the
// plugin sent and whether its retries are spent (so the agent loop does
// not repeat them), across gRPC, without changing the retryable
// classification that TestOpenAIRetries asserts.
func TestOpenAIRetriesSpent(t *testing.T) {
	srv := pt.New()
	defer srv.Close()
	c := inProcess(t, srv)
	for _, tc := range []struct {
		name      string
		script    pt.Script
		retryable bool
		attempts  int
		spent     bool
	}{
		{"529 every time", pt.OpenAIError(529, "server_error", "overloaded", "overloaded", nil), true, 3, true},
		{"401 is final at once", pt.OpenAIError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided", nil), false, 1, false},
		{"a retry-after beyond the longest wait is left to the caller", pt.OpenAIError(429, "requests", "rate_limit_exceeded", "Rate limit reached", map[string]string{"Retry-After": "20"}), true, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.Play(tc.script)
			o := run(context.Background(), c, chatReq)
			ri := provider.RetryOf(o.err)
			if ri.Retryable != tc.retryable || ri.Attempts != tc.attempts || ri.RetriesSpent != tc.spent {
				t.Fatalf("retry info %+v (%v), want retryable=%v attempts=%d spent=%v", ri, o.err, tc.retryable, tc.attempts, tc.spent)
			}
		})
	}
}
