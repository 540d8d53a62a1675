package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/uerr"
)

type fake struct{ blockUntilCancel bool }

func (fake) Info() base.Info {
	return base.Info{Name: "fake", Kind: base.KindProvider, Version: "1.0.0", APIVersions: []int{1, 2}}
}
func (fake) Configure(context.Context, base.Config, base.KernelClient) error { return nil }
func (fake) Health(context.Context) error                                    { return nil }
func (fake) Models(context.Context) ([]string, error)                        { return []string{"m1"}, nil }
func (f fake) Chat(ctx context.Context, req ChatRequest, send func(Event) error) error {
	if req.Model == "fail" {
		return uerr.New("PROVIDER_UPSTREAM", "upstream said 429", "rate limited", "wait and retry")
	}
	send(Event{TextDelta: "hel"})
	send(Event{TextDelta: "lo " + req.Messages[0].Content})
	send(Event{ToolCallDelta: &ToolCallDelta{Index: 0, ID: "call_1", Name: "fs.read"}})
	send(Event{ToolCallDelta: &ToolCallDelta{Index: 0, ArgumentsDelta: `{"path":`}})
	send(Event{ToolCallDelta: &ToolCallDelta{Index: 0, ArgumentsDelta: `"a.go"}`}})
	if req.Model == "slow" {
		<-ctx.Done()
		return ctx.Err()
	}
	send(Event{Usage: &Usage{InputTokens: 3, OutputTokens: 5}})
	return send(Event{Done: &Done{StopReason: "tool_use"}})
}

func dial(t *testing.T) Client {
	c, _ := plugin.TestPluginGRPCConn(t, false, PluginSets(fake{}, []int{2})[2])
	t.Cleanup(func() { c.Close() })
	raw, err := c.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(Client)
}

func TestChatStreamsInOrder(t *testing.T) {
	c := dial(t)
	var text, args string
	var done *Done
	err := c.Chat(context.Background(), ChatRequest{Model: "m1", Messages: []Message{{Role: "user", Content: "world"}}}, func(e Event) {
		text += e.TextDelta
		if e.ToolCallDelta != nil {
			args += e.ToolCallDelta.ArgumentsDelta
		}
		if e.Done != nil {
			done = e.Done
		}
	})
	if err != nil || text != "hello world" || args != `{"path":"a.go"}` || done == nil || done.StopReason != "tool_use" {
		t.Fatalf("err=%v text=%q args=%q done=%v", err, text, args, done)
	}
}

func TestChatUpstreamErrorIsStructured(t *testing.T) {
	err := dial(t).Chat(context.Background(), ChatRequest{Model: "fail"}, func(Event) {})
	if !uerr.HasCode(err, "PROVIDER_UPSTREAM") {
		t.Fatalf("got %v", err)
	}
}

func TestChatCancelStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err := dial(t).Chat(ctx, ChatRequest{Model: "slow", Messages: []Message{{Content: "x"}}}, func(Event) {})
	if err == nil || !errors.Is(ctx.Err(), context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("cancel: %v after %s", err, time.Since(start))
	}
}
