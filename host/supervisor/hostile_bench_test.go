package supervisor

import (
	"context"
	"encoding/json"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// BenchmarkHostilePluginHeap measures the kernel side's peak heap while a
// plugin attacks it: a 200 MiB result, a 200 MiB error,
// a million progress events. Run:
//
//	go test -run XXX -bench HostilePluginHeap -benchtime 1x ./host/supervisor
//
// peak-heap-MiB is the largest HeapInuse sampled every 2 ms during the call,
// minus the heap before it. The "unbounded" variants lift the kernel's
// limits (go-plugin's 2 GiB receive limit, no progress coalescing) to show
// what they prevent.
func BenchmarkHostilePluginHeap(b *testing.B) {
	cases := []struct{ name, tool, args string }{
		{"result-200MiB", "fx.flood", `{"bytes":209715200}`},
		{"error-200MiB", "fx.hostile_error", `{"bytes":209715200}`},
		{"progress-1e6", "fx.progress_flood", `{"count":1000000,"bytes":64}`},
	}
	for _, c := range cases {
		for _, unbounded := range []bool{false, true} {
			name := c.name
			if unbounded {
				name += "-unbounded"
			}
			b.Run(name, func(b *testing.B) { hostileHeap(b, c.tool, c.args, unbounded) })
		}
	}
}

func hostileHeap(b *testing.B, toolName, args string, unbounded bool) {
	h := newHarness(b, func(o *Options) {
		if unbounded {
			o.MaxRecvBytes, o.ProgressInterval = math.MaxInt32, time.Nanosecond
		}
	})
	if err := h.sup.Add(fixtureSpec(b, "good", []int{1, 2})); err != nil {
		b.Fatal(err)
	}
	if _, err := h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "w", Tool: "fx.echo", Args: json.RawMessage(`{}`)}, nil); err != nil {
		b.Fatal(err)
	}
	var peak uint64
	events := 0
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapInuse > base && m.HeapInuse-base > peak {
					peak = m.HeapInuse - base
				}
			}
		}()
		_, err := h.sup.CallTool(context.Background(), "fixture", tool.Call{ID: "h", Tool: toolName, Args: json.RawMessage(args)}, func(tool.Progress) { events++ })
		close(stop)
		wg.Wait()
		if toolName != "fx.progress_flood" && err == nil && !unbounded {
			b.Fatalf("%s: accepted", toolName)
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(events)/float64(b.N), "progress-delivered/op")
}
