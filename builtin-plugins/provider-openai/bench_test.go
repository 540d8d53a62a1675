package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
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
// upstream through the plugin's code called directly in process ("direct")
// and through the real plugin binary in its ai-provider container, over
// gRPC and the kernel's CONNECT proxy ("sandboxed"); it reports time to
// the first text delta and to the end of the turn (p50/p99).
func BenchmarkOpenAITurn(b *testing.B) {
	srv := pt.New()
	defer srv.Close()
	srv.Play(benchScript())
	direct := newOpenAI(nil, upstream.NewHTTPClient(func(string) string { return "" }))
	if err := direct.Configure(context.Background(), base.Config{ConfigJSON: cfgJSON(b, srv.URL()+"/v1")}, nil); err != nil {
		b.Fatal(err)
	}
	measure := func(b *testing.B, chat func(onEvent func(provider.Event)) error) {
		var first, full []time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			var tf time.Duration
			if err := chat(func(e provider.Event) {
				if tf == 0 && e.TextDelta != "" {
					tf = time.Since(t0)
				}
			}); err != nil {
				b.Fatal(err)
			}
			full = append(full, time.Since(t0))
			first = append(first, tf)
		}
		b.StopTimer()
		b.ReportMetric(float64(pct(first, 50).Microseconds()), "first-p50-µs")
		b.ReportMetric(float64(pct(first, 99).Microseconds()), "first-p99-µs")
		b.ReportMetric(float64(pct(full, 50).Microseconds()), "turn-p50-µs")
		b.ReportMetric(float64(pct(full, 99).Microseconds()), "turn-p99-µs")
	}
	b.Run("direct", func(b *testing.B) {
		measure(b, func(on func(provider.Event)) error {
			return direct.Chat(context.Background(), chatReq, func(e provider.Event) error { on(e); return nil })
		})
	})
	b.Run("sandboxed", func(b *testing.B) {
		ws, err := os.MkdirTemp("", "fws")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(ws) })
		os.Chmod(ws, 0o755)
		e := kerneltest.Start(b, ws, kerneltest.Options{Spec: func(s *supervisor.Spec) {
			s.ConfigJSON = cfgJSON(b, srv.URL()+"/v1")
			s.Network = []string{srv.Addr()}
		}}, "builtin-plugins/provider-openai")
		ctx := context.Background()
		err = e.Provider(ctx, pluginName, func(ctx context.Context, c provider.Client) error {
			measure(b, func(on func(provider.Event)) error { return c.Chat(ctx, chatReq, on) })
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
