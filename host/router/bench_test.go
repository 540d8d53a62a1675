package router

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// BenchmarkRouterOverhead measures what the router adds to a call: lookup,
// schema validation, the workflow gate, the policy for each path, the
// tool_execute/syscall/tool_result audit records (buffered, as in the
// kernel), output limit and redaction. The plugin answers at once, so the
// "router" case is overhead only; "direct" calls the same dispatcher
// without the router, in the same run. p50/p99 are reported per case.
func BenchmarkRouterOverhead(b *testing.B) {
	f := newFixture(b)
	sess := &Session{ID: "bench", Mode: "strict", Caller: "model", Gate: gateFunc{state: "code_writing", f: func(string, string, bool) error { return nil }}}
	args := json.RawMessage(`{"path":"src/app/main.go"}`)
	disp := f.r.o.Dispatcher
	run := func(b *testing.B, one func()) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			one()
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("direct", func(b *testing.B) {
		run(b, func() {
			if _, err := disp.Dispatch(context.Background(), "demo", tool.Call{ID: "x", Tool: "demo.read", Args: args}, nil); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("router", func(b *testing.B) {
		run(b, func() {
			if r := f.r.Call(context.Background(), sess, Call{Plugin: "demo", Tool: "demo.read", Args: args}); !r.OK {
				b.Fatal(r.Err)
			}
		})
	})
}
