package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

var (
	turn1 = []provider.Event{
		{TextDelta: "Reading both."},
		{ToolCallStart: &provider.ToolCallStart{CallID: "c1", Name: "fs.read"}},
		{ToolCallDelta: &provider.ToolCallDelta{CallID: "c1", ArgumentsDelta: `{"pa`}},
		{ToolCallDelta: &provider.ToolCallDelta{CallID: "c1", ArgumentsDelta: `th": "a.go"}`}},
		{ToolCallEnd: &provider.ToolCallEnd{CallID: "c1", Name: "fs.read", Arguments: json.RawMessage(`{"path": "a.go"}`)}},
		{ToolCallStart: &provider.ToolCallStart{CallID: "c2", Name: "fs.read"}},
		{ToolCallDelta: &provider.ToolCallDelta{CallID: "c2", ArgumentsDelta: `{"path":"b.go"}`}},
		{ToolCallEnd: &provider.ToolCallEnd{CallID: "c2", Name: "fs.read", Arguments: json.RawMessage(`{"path":"b.go"}`)}},
		{Usage: &provider.Usage{InputTokens: 120, OutputTokens: 30, CacheReadTokens: 64}},
		{Done: &provider.Done{StopReason: provider.StopToolUse, RawStopReason: "tool_calls", Model: "gpt-4.1"}},
	}
	turn2 = []provider.Event{
		{TextDelta: "Both files "}, {TextDelta: "are fine."},
		{Usage: &provider.Usage{InputTokens: 200, OutputTokens: 5}},
		{Done: &provider.Done{StopReason: provider.StopEndTurn, RawStopReason: "stop"}},
	}
	req1 = provider.ChatRequest{Model: "replay", Messages: []provider.Message{{Role: provider.RoleUser, Content: "check a.go and b.go"}},
		Tools: []provider.ToolSpec{{Name: "fs.read"}}}
)

func req2() provider.ChatRequest {
	r := req1
	r.Messages = append(append([]provider.Message(nil), req1.Messages...),
		provider.Message{Role: provider.RoleAssistant, Content: "Reading both.", ToolCalls: []provider.ToolCall{
			{ID: "c1", Name: "fs.read", Arguments: json.RawMessage(`{"path":"a.go"}`)}, {ID: "c2", Name: "fs.read", Arguments: json.RawMessage(`{"path":"b.go"}`)}}},
		provider.Message{Role: provider.RoleTool, ToolCallID: "c1", Content: "package a"},
		provider.Message{Role: provider.RoleTool, ToolCallID: "c2", Content: "package b"})
	return r
}

// writeCassette records the two turns with the Go API, plus a slow third
// turn (10 s between events) for cancellation.
func writeCassette(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	w := cassette.NewWriter(&buf)
	if err := w.Add(req1, turn1); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(req2(), turn2); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTurn(provider.ChatRequest{}, cassette.Turn{DelayMS: cassette.MaxDelayMS, Events: []provider.Event{{TextDelta: "slow"}, {TextDelta: "er"}, {Done: &provider.Done{StopReason: provider.StopEndTurn}}}}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func req3() provider.ChatRequest {
	r := req2()
	r.Messages = append(r.Messages, provider.Message{Role: provider.RoleAssistant, Content: "Both files are fine."}, provider.Message{Role: provider.RoleUser, Content: "slowly"})
	return r
}

func configJSON(t *testing.T, cas string) []byte {
	b, err := json.Marshal(Config{Cassette: cas})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// inProcess serves the plugin over real gRPC in this process (API v2).
func inProcess(t *testing.T, cas string) provider.Client {
	t.Helper()
	c, _ := plugin.TestPluginGRPCConn(t, false, provider.PluginSets(newReplay(nil), []int{2})[2])
	t.Cleanup(func() { c.Close() })
	raw, err := c.Dispense(provider.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	pc := raw.(provider.Client)
	if err := pc.Configure(context.Background(), base.Config{ConfigJSON: configJSON(t, cas), APIVersion: 2}, nil); err != nil {
		t.Fatal(err)
	}
	return pc
}

func chat(ctx context.Context, c provider.Client, req provider.ChatRequest) ([]provider.Event, error) {
	var evs []provider.Event
	err := c.Chat(ctx, req, func(e provider.Event) { evs = append(evs, e) })
	return evs, err
}

// conversation plays the whole cassette against c; shared by the
// in-process and the sandboxed test.
func conversation(t *testing.T, ctx context.Context, c provider.Client) {
	for i, tc := range []struct {
		req  provider.ChatRequest
		want []provider.Event
	}{{req1, turn1}, {req2(), turn2}} {
		got, err := chat(ctx, c, tc.req)
		if err != nil {
			t.Fatalf("turn %d: %v", i+1, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(tc.want)
			t.Fatalf("turn %d replayed\n %s\nrecorded\n %s", i+1, gj, wj)
		}
	}
	// Diverging: turn 2 answering another call.
	bad := req2()
	bad.Messages[len(bad.Messages)-1].ToolCallID = "c7"
	_, err := chat(ctx, c, bad)
	if ue, ok := uerr.As(err); !ok || ue.Code != cassette.CodeMismatch || !strings.Contains(ue.What, "turn 2") || !strings.Contains(ue.Why, `call "c7"`) {
		t.Fatalf("diverging request: %#v", err)
	}
	// Past the end.
	past := req3()
	past.Messages = append(past.Messages, provider.Message{Role: provider.RoleAssistant, Content: "x"}, provider.Message{Role: provider.RoleUser, Content: "more"})
	if _, err := chat(ctx, c, past); !uerr.HasPluginCode(err, cassette.CodeExhausted) || !strings.Contains(err.Error(), "turn 4") {
		t.Fatalf("past the end: %v", err)
	}
	// Cancelled mid-stream: the turn pauses 10 s between events; the call
	// returns after the first without the rest (a structural check:
	// finishing would take 20 s and deliver done).
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var evs []provider.Event
	err = c.Chat(cctx, req3(), func(e provider.Event) { evs = append(evs, e); cancel() })
	if err == nil || len(evs) != 1 || evs[0].TextDelta != "slow" {
		t.Fatalf("cancelled turn: err=%v events=%+v", err, evs)
	}
	t.Logf("cancelled turn returned %s after it started", time.Since(start).Round(time.Millisecond))
	_ = start
}

func TestReplayInProcess(t *testing.T) {
	c := inProcess(t, writeCassette(t))
	conversation(t, context.Background(), c)
	ms, err := c.Models(context.Background())
	if err != nil || len(ms) != 1 || ms[0].ID != "replay" {
		t.Fatalf("models %+v %v", ms, err)
	}
}

func TestReplayConfigureRefusesBadCassettes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  []byte
		code string
	}{
		{"no config", nil, provider.CodeConfig},
		{"not json", []byte("{"), provider.CodeConfig},
		{"no cassette", []byte(`{"model":"x"}`), provider.CodeConfig},
		{"broken cassette", []byte(`{"cassette":"{\"turn\":1,\"events\":[{\"text_delta\":\"x\"}]}"}`), cassette.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := newReplay(nil).Configure(context.Background(), base.Config{ConfigJSON: tc.cfg}, nil)
			if !uerr.HasCode(err, tc.code) {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
	err := newReplay(nil).Chat(context.Background(), req1, func(provider.Event) error { return nil })
	if !uerr.HasCode(err, provider.CodeConfig) {
		t.Fatalf("chat without configure: %v", err)
	}
}

// TestReplayInDockerSandbox runs the real plugin binary in its ai-provider
// L2 container through the kernel's supervisor, the cassette passed in the
// config JSON at Configure.
func TestReplayInDockerSandbox(t *testing.T) {
	cas := writeCassette(t)
	ws, err := os.MkdirTemp("", "fws")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	os.Chmod(ws, 0o755)
	e := kerneltest.Start(t, ws, kerneltest.Options{Spec: func(s *supervisor.Spec) { s.ConfigJSON = configJSON(t, cas) }}, "builtin-plugins/provider-replay")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err = e.Provider(ctx, pluginName, func(ctx context.Context, c provider.Client) error {
		if c.APIVersion() != 2 {
			return errors.New("negotiated API version is not 2")
		}
		conversation(t, ctx, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
