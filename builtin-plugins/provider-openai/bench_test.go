package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	pt "github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// benchScript is a 200-delta text answer.
func benchScript() pt.Script {
	evs := []string{pt.OpenAIRole}
	for i := 0; i < 200; i++ {
		evs = append(evs, pt.OpenAIText(fmt.Sprintf("word%d ", i)))
	}
	return pt.Stream(0, append(evs, pt.OpenAIFinish("stop"), pt.OpenAIUsageChunk(100, 200, 0, 0), pt.OpenAIDone)...)
}

// BenchmarkOpenAITurn compares one streamed turn against the same fake
// upstream three ways: the official SDK used directly in process, as an
// application would (NewStreaming and its accumulator: "sdk"); the
// plugin's code called directly in process ("direct"); and the real plugin
// binary in its ai-provider container, over gRPC and the kernel's CONNECT
// proxy ("sandboxed"). It reports time to the first text delta and to the
// end of the turn (p50/p99).
func BenchmarkOpenAITurn(b *testing.B) {
	srv := pt.New()
	defer srv.Close()
	srv.Play(benchScript())
	hc := upstream.NewHTTPClient(func(string) string { return "" })
	direct := newOpenAI(nil, hc)
	if err := direct.Configure(context.Background(), base.Config{ConfigJSON: cfgJSON(b, srv.URL()+"/v1")}, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("sdk", func(b *testing.B) {
		names, err := provider.ToolNamesOf(chatReq.Tools)
		if err != nil {
			b.Fatal(err)
		}
		params := buildRequest(chatReq, "gpt-4.1", srv.URL()+"/v1", names)
		client := oa.NewClient(option.WithBaseURL(srv.URL()+"/v1/"), option.WithAPIKey(testKey), option.WithMaxRetries(0),
			option.WithHTTPClient(hc))
		pt.MeasureTurns(b, func(on func(provider.Event)) error {
			stream := client.Chat.Completions.NewStreaming(context.Background(), params)
			defer stream.Close()
			var acc oa.ChatCompletionAccumulator
			for stream.Next() {
				c := stream.Current()
				acc.AddChunk(c)
				if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
					on(provider.Event{TextDelta: c.Choices[0].Delta.Content})
				}
			}
			return stream.Err()
		})
	})
	b.Run("direct", func(b *testing.B) {
		pt.MeasureTurns(b, func(on func(provider.Event)) error {
			return direct.Chat(context.Background(), chatReq, func(e provider.Event) error { on(e); return nil })
		})
	})
	b.Run("sandboxed", func(b *testing.B) {
		e := kerneltest.StartProvider(b, "builtin-plugins/provider-openai", cfgJSON(b, srv.URL()+"/v1"), srv.Addr())
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

// throughputTokens is the length of BenchmarkOpenAIThroughput's answer:
// 4 000 one-token text deltas.
const throughputTokens = 4000

// BenchmarkOpenAIThroughput streams a 4 000-token answer (one token per
// SSE chunk) from the fake upstream, through the plugin's code in process
// ("direct") and through the real plugin in its ai-provider container over
// gRPC and the kernel's CONNECT proxy ("sandboxed"). It reports tokens/s
// (p50 over the turns) and the memory of this process, which is the
// kernel side of the sandboxed run (supervisor, gRPC client, proxy; the
// fake upstream lives here too): the peak of live heap objects sampled
// every 2 ms while streaming, its growth over the heap before the first
// turn (after a GC: what streaming adds to the open kernel's badger, caches
// and buffers), and the resident set after it.
//
//	go test -run XXX -bench OpenAIThroughput -benchtime=20x ./builtin-plugins/provider-openai/
func BenchmarkOpenAIThroughput(b *testing.B) {
	evs := []string{pt.OpenAIRole}
	textLen := 0
	for i := 0; i < throughputTokens; i++ {
		tok := fmt.Sprintf("t%d ", i)
		textLen += len(tok)
		evs = append(evs, pt.OpenAIText(tok))
	}
	srv := pt.New()
	defer srv.Close()
	srv.Play(pt.Stream(0, append(evs, pt.OpenAIFinish("stop"), pt.OpenAIUsageChunk(100, throughputTokens, 0, 0), pt.OpenAIDone)...))
	direct := newOpenAI(nil, upstream.NewHTTPClient(func(string) string { return "" }))
	if err := direct.Configure(context.Background(), base.Config{ConfigJSON: cfgJSON(b, srv.URL()+"/v1")}, nil); err != nil {
		b.Fatal(err)
	}
	measure := func(b *testing.B, chat func(onEvent func(provider.Event)) error) {
		var rates []float64
		var peak uint64
		base := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		runtime.GC()
		metrics.Read(base)
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					metrics.Read(s)
					peak = max(peak, s[0].Value.Uint64())
				}
			}
		}()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			// The plugin merges deltas that wait together, so the
			// answer is checked by its length, not by counting events.
			got := 0
			if err := chat(func(e provider.Event) { got += len(e.TextDelta) }); err != nil {
				b.Fatal(err)
			}
			if got != textLen {
				b.Fatalf("%d bytes of text, want %d", got, textLen)
			}
			rates = append(rates, throughputTokens/time.Since(t0).Seconds())
		}
		b.StopTimer()
		close(stop)
		<-sampled
		slices.Sort(rates)
		b.ReportMetric(rates[len(rates)/2], "tokens/s")
		b.ReportMetric(rates[0], "tokens/s-min")
		b.ReportMetric(float64(peak)/(1<<20), "heap-peak-MiB")
		b.ReportMetric(float64(peak-min(peak, base[0].Value.Uint64()))/(1<<20), "heap-growth-MiB")
		b.ReportMetric(rssMiB(), "rss-MiB")
	}
	b.Run("direct", func(b *testing.B) {
		measure(b, func(on func(provider.Event)) error {
			return direct.Chat(context.Background(), chatReq, func(e provider.Event) error { on(e); return nil })
		})
	})
	b.Run("sandboxed", func(b *testing.B) {
		e := kerneltest.StartProvider(b, "builtin-plugins/provider-openai", cfgJSON(b, srv.URL()+"/v1"), srv.Addr())
		ctx := context.Background()
		err := e.Provider(ctx, pluginName, func(ctx context.Context, c provider.Client) error {
			measure(b, func(on func(provider.Event)) error { return c.Chat(ctx, chatReq, on) })
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}

// rssMiB is this process's resident set (VmRSS), 0 where /proc is absent.
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
