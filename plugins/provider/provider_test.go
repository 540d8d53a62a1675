package provider

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	pbv1 "github.com/fluffy-waffle/fluffy/plugins/provider/proto/v1"
)

// fake is a provider written against this package: it uses Stream, as the
// builtin plugins do.
type fake struct{}

func (fake) Info() base.Info {
	return base.Info{Name: "fake", Kind: base.KindProvider, Version: "1.0.0", APIVersions: []int{1, 2}}
}
func (fake) Configure(context.Context, base.Config, base.KernelClient) error { return nil }
func (fake) Health(context.Context) error                                    { return nil }
func (fake) Models(context.Context) ([]ModelInfo, error) {
	return []ModelInfo{{ID: "m1", ContextWindow: 128000, Tools: true, Reasoning: true}}, nil
}

func (fake) Chat(ctx context.Context, req ChatRequest, send func(Event) error) error {
	names, err := ToolNamesOf(req.Tools)
	if err != nil {
		return err
	}
	s := NewStream(send, req.RequestID, names)
	switch req.Model {
	case "fail":
		return NewError(CodeRateLimited, "rate limited", "429 from upstream", "wait", RetryInfo{Retryable: true, After: 1500 * time.Millisecond, HTTPStatus: 429, UpstreamRequestID: "req_9"})
	case "slow":
		_ = s.Text("tick")
		<-ctx.Done()
		return ctx.Err()
	}
	_ = s.Reasoning("let me ")
	_ = s.Reasoning("think")
	_ = s.EndReasoning("sig-abc", nil)
	_ = s.Text("hel")
	_ = s.Text("lo " + req.Messages[0].Content)
	id, _ := s.StartCall("call_1", "fs_read")
	_ = s.CallArgs(id, `{"path":`)
	_ = s.CallArgs(id, `"a.go"}`)
	_ = s.EndCall(id)
	id2, _ := s.StartCall("", "fs_list") // no id upstream: generated
	_ = s.EndCall(id2)                   // no arguments: {}
	id3, _ := s.StartCall("call_3", "fs_read")
	_ = s.CallArgs(id3, `{"path": "b`) // cut off by max_tokens
	s.SetUsage(Usage{InputTokens: 3, OutputTokens: 5, CacheReadTokens: 2})
	return s.Finish(Done{StopReason: StopMaxTokens, RawStopReason: "length", UpstreamRequestID: "req_1"})
}

func dial(t *testing.T, version int, impl Plugin) Client {
	c, _ := plugin.TestPluginGRPCConn(t, false, PluginSets(impl, []int{version})[version])
	t.Cleanup(func() { c.Close() })
	raw, err := c.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(Client)
}

var tools = []ToolSpec{{Name: "fs.read"}, {Name: "fs.list"}}

func collect(t *testing.T, c Client, req ChatRequest) ([]Event, Result, error) {
	t.Helper()
	var evs []Event
	turn := NewTurn()
	err := c.Chat(context.Background(), req, func(e Event) {
		evs = append(evs, e)
		if aerr := turn.Add(e); aerr != nil {
			t.Errorf("client delivered an event its own checker refuses: %v", aerr)
		}
	})
	return evs, turn.Result(), err
}

func TestV2StreamsEveryEventKind(t *testing.T) {
	c := dial(t, 2, fake{})
	evs, r, err := collect(t, c, ChatRequest{RequestID: "r1", Model: "m1", Tools: tools, Messages: []Message{{Role: RoleUser, Content: "world"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != "hello world" {
		t.Errorf("text %q", r.Text)
	}
	if want := []ReasoningBlock{{Text: "let me think", Signature: "sig-abc"}}; !reflect.DeepEqual(r.Reasoning, want) {
		t.Errorf("reasoning %+v", r.Reasoning)
	}
	if len(r.ToolCalls) != 3 {
		t.Fatalf("calls %+v", r.ToolCalls)
	}
	if c0 := r.ToolCalls[0]; c0.CallID != "call_1" || c0.Name != "fs.read" || string(c0.Arguments) != `{"path":"a.go"}` || c0.Invalid != nil {
		t.Errorf("call 0 %+v", c0)
	}
	if c1 := r.ToolCalls[1]; !strings.HasPrefix(c1.CallID, "call_") || c1.Name != "fs.list" || string(c1.Arguments) != "{}" || c1.Invalid != nil {
		t.Errorf("call 1 %+v", c1)
	}
	if c2 := r.ToolCalls[2]; c2.Invalid == nil || c2.Invalid.Code != CodeInvalidToolCall || string(c2.Arguments) != "{}" || c2.RawArguments != `{"path": "b` {
		t.Errorf("call 2 (cut off) %+v", c2)
	}
	if r.Usage != (Usage{InputTokens: 3, OutputTokens: 5, CacheReadTokens: 2}) || r.Done == nil || r.Done.StopReason != StopMaxTokens || r.Done.UpstreamRequestID != "req_1" {
		t.Errorf("usage %+v done %+v", r.Usage, r.Done)
	}
	if evs[len(evs)-2].Usage == nil {
		t.Errorf("usage must come just before done: %+v", evs[len(evs)-2])
	}
	// The generated id is stable for the same request id.
	_, r2, _ := collect(t, c, ChatRequest{RequestID: "r1", Model: "m1", Tools: tools, Messages: []Message{{Role: RoleUser, Content: "world"}}})
	if r2.ToolCalls[1].CallID != r.ToolCalls[1].CallID {
		t.Errorf("generated ids differ: %s vs %s", r.ToolCalls[1].CallID, r2.ToolCalls[1].CallID)
	}
	ms, err := c.Models(context.Background())
	if err != nil || len(ms) != 1 || ms[0].ContextWindow != 128000 || !ms[0].Reasoning {
		t.Errorf("models %+v %v", ms, err)
	}
}

func TestV2ErrorCarriesRetryInfo(t *testing.T) {
	_, _, err := collect(t, dial(t, 2, fake{}), ChatRequest{Model: "fail"})
	ue, ok := uerr.As(err)
	if !ok || ue.Code != CodeRateLimited {
		t.Fatalf("got %v", err)
	}
	ri := RetryOf(err)
	if !ri.Retryable || ri.After != 1500*time.Millisecond || ri.HTTPStatus != 429 || ri.UpstreamRequestID != "req_9" {
		t.Fatalf("retry info %+v", ri)
	}
}

func TestCancelStopsTheStream(t *testing.T) {
	for _, v := range []int{1, 2} {
		ctx, cancel := context.WithCancel(context.Background())
		start := time.Now()
		err := dial(t, v, fake{}).Chat(ctx, ChatRequest{Model: "slow", Messages: []Message{{Content: "x"}}}, func(e Event) {
			if e.TextDelta != "" {
				cancel()
			}
		})
		if err == nil || !errors.Is(ctx.Err(), context.Canceled) || time.Since(start) > 5*time.Second {
			t.Fatalf("v%d cancel: %v after %s", v, err, time.Since(start))
		}
	}
}

// A plugin written against this package still serves a v1 kernel, and the
// kernel's v1 client turns v1's fragments back into checked events.
func TestV1RoundTrip(t *testing.T) {
	c := dial(t, 1, fake{})
	if c.APIVersion() != 1 {
		t.Fatal("not v1")
	}
	_, r, err := collect(t, c, ChatRequest{RequestID: "r1", Model: "m1", Tools: tools, Messages: []Message{{Role: RoleUser, Content: "world"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != "hello world" || len(r.Reasoning) != 0 || len(r.ToolCalls) != 3 || r.Done.StopReason != StopMaxTokens {
		t.Fatalf("%+v", r)
	}
	if string(r.ToolCalls[0].Arguments) != `{"path":"a.go"}` || r.ToolCalls[0].Name != "fs.read" || r.ToolCalls[2].Invalid == nil {
		t.Fatalf("calls %+v", r.ToolCalls)
	}
	_, _, err = collect(t, c, ChatRequest{Model: "fail"})
	if !uerr.HasPluginCode(err, CodeRateLimited) {
		t.Fatalf("error over v1: %v", err)
	}
}

// rawV1 is a provider that speaks the v1 wire directly, as plugins built
// before API v2 do.
type rawV1 struct {
	pbv1.UnimplementedProviderServer
	events []*pbv1.ChatEvent
}

func (r *rawV1) Chat(_ *pbv1.ChatRequest, s pbv1.Provider_ChatServer) error {
	for _, e := range r.events {
		if err := s.Send(e); err != nil {
			return err
		}
	}
	return nil
}

type rawV1Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *rawV1
}

func (p *rawV1Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pbv1.RegisterProviderServer(s, p.srv)
	return nil
}
func (p *rawV1Plugin) GRPCClient(ctx context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return (&GRPCPluginV1{}).GRPCClient(ctx, b, c)
}

func v1delta(i int32, id, name, args string) *pbv1.ChatEvent {
	return &pbv1.ChatEvent{Event: &pbv1.ChatEvent_ToolCallDelta{ToolCallDelta: &pbv1.ToolCallDelta{Index: i, Id: id, Name: name, ArgumentsDelta: args}}}
}

func TestV1PluginOnTheNewKernel(t *testing.T) {
	done := &pbv1.ChatEvent{Event: &pbv1.ChatEvent_Done{Done: &pbv1.Done{StopReason: "tool_calls"}}}
	cases := []struct {
		name    string
		events  []*pbv1.ChatEvent
		calls   []string // name(args)
		invalid int
		rule    string
	}{
		{"parallel calls by index", []*pbv1.ChatEvent{v1delta(0, "a", "fs.read", `{"p":`), v1delta(1, "b", "fs.list", ""), v1delta(0, "", "", `1}`), done},
			[]string{`fs.read({"p":1})`, `fs.list({})`}, 0, ""},
		{"arguments not JSON", []*pbv1.ChatEvent{v1delta(0, "a", "fs.read", `{"p":`), done}, []string{`fs.read({})`}, 1, ""},
		{"no done", []*pbv1.ChatEvent{v1delta(0, "a", "fs.read", `{}`)}, nil, 0, RuleEnd},
		{"first fragment nameless", []*pbv1.ChatEvent{v1delta(0, "a", "", `{}`), done}, nil, 0, RuleOrder},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{PluginName: &rawV1Plugin{srv: &rawV1{events: tc.events}}})
			defer c.Close()
			raw, err := c.Dispense(PluginName)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			invalid := 0
			err = raw.(Client).Chat(context.Background(), ChatRequest{}, func(e Event) {
				if e.ToolCallEnd != nil {
					got = append(got, e.ToolCallEnd.Name+"("+string(e.ToolCallEnd.Arguments)+")")
					if e.ToolCallEnd.Invalid != nil {
						invalid++
					}
				}
			})
			if tc.rule != "" {
				var pe *ProtocolError
				if !errors.As(err, &pe) || pe.Rule != tc.rule || !uerr.HasCode(err, base.CodeMalformed) {
					t.Fatalf("want a %s violation, got %v", tc.rule, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.calls) || invalid != tc.invalid {
				t.Fatalf("err=%v calls=%v invalid=%d", err, got, invalid)
			}
		})
	}
}

func TestTurnRefusesBrokenSequences(t *testing.T) {
	start := func(id string) Event { return Event{ToolCallStart: &ToolCallStart{CallID: id, Name: "fs.read"}} }
	delta := func(id, a string) Event { return Event{ToolCallDelta: &ToolCallDelta{CallID: id, ArgumentsDelta: a}} }
	end := func(id, a string) Event {
		return Event{ToolCallEnd: &ToolCallEnd{CallID: id, Name: "fs.read", Arguments: json.RawMessage(a)}}
	}
	done := Event{Done: &Done{StopReason: StopToolUse}}
	cases := []struct {
		name string
		evs  []Event
		rule string // "" = accepted
	}{
		{"good", []Event{{TextDelta: "x"}, start("a"), delta("a", `{"p":`), delta("a", `1}`), end("a", `{"p":1}`), done}, ""},
		{"empty args mean {}", []Event{start("a"), end("a", `{}`), done}, ""},
		{"delta before start", []Event{delta("a", `{}`), done}, RuleOrder},
		{"end before start", []Event{end("a", `{}`), done}, RuleOrder},
		{"started twice", []Event{start("a"), start("a")}, RuleOrder},
		{"done with a call open", []Event{start("a"), delta("a", `{}`), done}, RuleOrder},
		{"event after done", []Event{done, {TextDelta: "late"}}, RuleOrder},
		{"end args not JSON", []Event{start("a"), delta("a", `{"p":`), end("a", `{"p":`), done}, RuleArguments},
		{"end args differ from deltas", []Event{start("a"), delta("a", `{"p":1}`), end("a", `{"p":2}`), done}, RuleArguments},
		{"two fields set", []Event{{TextDelta: "x", Done: &Done{}}}, RuleEmpty},
		{"no end", []Event{{TextDelta: "x"}}, RuleEnd},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			turn := NewTurn()
			var err error
			for _, e := range tc.evs {
				if err = turn.Add(e); err != nil {
					break
				}
			}
			if err == nil {
				err = turn.End()
			}
			var pe *ProtocolError
			switch {
			case tc.rule == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.rule != "" && (!errors.As(err, &pe) || pe.Rule != tc.rule):
				t.Fatalf("want rule %s, got %v", tc.rule, err)
			}
		})
	}
}

func TestCheckArguments(t *testing.T) {
	cases := []struct {
		raw       string
		truncated bool
		args      string
		invalid   bool
	}{
		{"", false, "{}", false},
		{"null", false, "{}", false},
		{"  ", false, "{}", false},
		{`{"a":1}`, false, `{"a":1}`, false},
		{`{"a":`, false, "{}", true},
		{`[1,2]`, false, "{}", true},
		{`"x"`, false, "{}", true},
		{`{"a":1}{"b":2}`, false, "{}", true},
		{`{"a":1}`, true, "{}", true},
		{"", true, "{}", true},
	}
	for _, tc := range cases {
		end := CheckArguments("c", "fs.read", tc.raw, tc.truncated)
		if string(end.Arguments) != tc.args || (end.Invalid != nil) != tc.invalid {
			t.Errorf("%q truncated=%v: args %s invalid %v", tc.raw, tc.truncated, end.Arguments, end.Invalid)
		}
		if end.Invalid != nil {
			res := InvalidCallResult(*end)
			if !res.IsError || res.ToolCallID != "c" || !strings.Contains(res.Content, "not executed") {
				t.Errorf("result %+v", res)
			}
		}
	}
}

func TestToolNames(t *testing.T) {
	n, err := NewToolNames([]string{"fs.read", "search.grep", "a_b.c"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Wire("fs.read") != "fs_read" || n.Wire("search.grep") != "search_grep" {
		t.Fatal(n.Wire("fs.read"))
	}
	if f, ok := n.Fluffy("fs_read"); !ok || f != "fs.read" {
		t.Fatal(f, ok)
	}
	if f, ok := n.Fluffy("made_up"); ok || f != "made_up" {
		t.Fatal(f, ok)
	}
	_, err = NewToolNames([]string{"a_b.c", "a.b_c", "fs.read"})
	if !uerr.HasCode(err, CodeToolNames) || !strings.Contains(err.Error(), `"a.b_c"`) || !strings.Contains(err.Error(), `"a_b.c"`) || !strings.Contains(err.Error(), "a_b_c") {
		t.Fatalf("collision: %v", err)
	}
	_, err = NewToolNames([]string{"x." + strings.Repeat("y", 70)})
	if !uerr.HasCode(err, CodeToolNames) {
		t.Fatalf("long name: %v", err)
	}
}
