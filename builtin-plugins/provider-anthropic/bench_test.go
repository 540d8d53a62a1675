package main

import (
	"context"
	"fmt"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	pt "github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// BenchmarkAnthropicTurn is BenchmarkOpenAITurn for Messages streaming: a
// 200-delta text answer from the local fake server, through the official
// SDK used directly in process (NewStreaming and Message.Accumulate:
// "sdk"), the plugin's code in process ("direct"), and the real plugin in
// its ai-provider container over gRPC and the kernel's CONNECT proxy
// ("sandboxed"); time to the first text delta and to the end of the turn.
//
//	go test -run '^$' -bench AnthropicTurn -benchtime 200x ./builtin-plugins/provider-anthropic/
func BenchmarkAnthropicTurn(b *testing.B) {
	evs := []string{pt.AnthropicStart(100, 0, 0), pt.AnthropicTextStart(0)}
	for i := 0; i < 200; i++ {
		evs = append(evs, pt.AnthropicText(0, fmt.Sprintf("word%d ", i)))
	}
	evs = append(evs, pt.AnthropicBlockStop(0), pt.AnthropicDelta("end_turn", 200), pt.AnthropicStop)
	srv := pt.New()
	defer srv.Close()
	srv.Play(pt.AnthropicStream(0, evs...))
	hc := upstream.NewHTTPClient(func(string) string { return "" })

	b.Run("sdk", func(b *testing.B) {
		names, err := provider.ToolNamesOf(chatReq.Tools)
		if err != nil {
			b.Fatal(err)
		}
		params := buildRequest(chatReq, pt.AnthropicModel, names)
		client := sdk.NewClient(option.WithBaseURL(srv.URL()+"/"), option.WithAPIKey(testKey), option.WithMaxRetries(0), option.WithHTTPClient(hc))
		pt.MeasureTurns(b, func(on func(provider.Event)) error {
			stream := client.Messages.NewStreaming(context.Background(), params)
			defer stream.Close()
			var msg sdk.Message
			for stream.Next() {
				ev := stream.Current()
				if err := msg.Accumulate(ev); err != nil {
					return err
				}
				if d, ok := ev.AsAny().(sdk.ContentBlockDeltaEvent); ok && d.Delta.Text != "" {
					on(provider.Event{TextDelta: d.Delta.Text})
				}
			}
			return stream.Err()
		})
	})
	b.Run("direct", func(b *testing.B) {
		direct := newAnthropic(nil, hc)
		if err := direct.Configure(context.Background(), base.Config{ConfigJSON: cfgJSON(b, srv.URL())}, nil); err != nil {
			b.Fatal(err)
		}
		pt.MeasureTurns(b, func(on func(provider.Event)) error {
			return direct.Chat(context.Background(), chatReq, func(e provider.Event) error { on(e); return nil })
		})
	})
	b.Run("sandboxed", func(b *testing.B) {
		e := kerneltest.StartProvider(b, "builtin-plugins/provider-anthropic", cfgJSON(b, srv.URL()), srv.Addr())
		ctx := context.Background()
		err := e.Provider(ctx, pluginName, func(ctx context.Context, c provider.Client) error {
			pt.MeasureTurns(b, func(on func(provider.Event)) error { return c.Chat(ctx, chatReq, on) })
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}
