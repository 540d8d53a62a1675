package state

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
)

// reportQuantiles reports the p50 and p99 of per-operation durations.
func reportQuantiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkAllowed measures the gate the router asks before every tool
// call. Calls are timed in batches of 256 (a clock read per call would
// cost as much as the call); p50-ns is the median batch's time per call.
func BenchmarkAllowed(b *testing.B) {
	r := DefaultRules()
	e := newEnv(b, nil)
	m, _ := e.session("bench", "")
	ctx := context.Background()
	_, _ = m.Start(ctx, "x")
	_, _ = m.PlanComplete(ctx, "p", "ai")
	cw := Position{State: CodeWriting, Mode: Strict}
	tw := Position{State: TestWriting, Mode: Strict}
	cases := []struct {
		name string
		call func() error
	}{
		{"pure/write-source-code_writing", func() error { return r.Allowed(cw, "fs.write", "internal/config/parse.go", true) }},
		{"pure/write-test-test_writing", func() error { return r.Allowed(tw, "fs.write", "internal/config/parse_test.go", true) }},
		{"pure/read", func() error { return r.Allowed(tw, "fs.read", "internal/config/parse.go", false) }},
		{"pure/refused-source-test_writing", func() error { return r.Allowed(tw, "fs.write", "internal/config/parse.go", true) }},
		{"machine/write-test-test_writing", func() error { return m.Allowed("fs.write", "internal/config/parse_test.go", true) }},
		{"machine/refused-source-test_writing", func() error { return m.Allowed("fs.write", "internal/config/parse.go", true) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			const batch = 256
			var ds []time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; {
				n := min(batch, b.N-i)
				start := time.Now()
				for range n {
					_ = c.call()
				}
				if n == batch {
					ds = append(ds, time.Since(start)/batch)
				}
				i += n
			}
			b.StopTimer()
			reportQuantiles(b, ds)
		})
	}
}

// BenchmarkTransition measures one workflow transition including its
// state record and durable audit record, against the bare durable audit
// append on the same database in the same run.
func BenchmarkTransition(b *testing.B) {
	ctx := context.Background()
	b.Run("baseline-durable-audit-append", func(b *testing.B) {
		e := newEnv(b, nil)
		ds := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			if _, err := e.log.Append(ctx, audit.Event{Type: audit.EventStateTransition, Security: true, SessionID: "bench", State: "planning",
				Metadata: map[string]string{"event": "start", "from": "idle", "to": "planning"}}); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		b.StopTimer()
		reportQuantiles(b, ds)
	})
	b.Run("transition", func(b *testing.B) {
		e := newEnv(b, nil)
		m, _ := e.session("bench", "")
		ds := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			start := time.Now()
			var err error
			if i%2 == 0 {
				_, err = m.Start(ctx, "task")
			} else {
				_, err = m.Cancel(ctx, "again")
			}
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		b.StopTimer()
		reportQuantiles(b, ds)
	})
}
