package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkEnqueueDispatch measures Submit (enqueue, then dispatch) with
// 1000 tasks already queued. "start": the new task's template has a free
// slot, so dispatch starts it; "queue": its template is full, so dispatch
// queues it (and considers preemption). p50-ns is the median Submit.
func BenchmarkEnqueueDispatch(b *testing.B) {
	for _, mode := range []string{"start", "queue"} {
		b.Run(mode, func(b *testing.B) {
			s := newSched(b, Config{}, nil)
			var releases []chan struct{}
			for i := range 2 { // fill code-executor
				t, rel := blocker(fmt.Sprintf("blocker%d", i), 3, "code-executor")
				submit(b, s, t)
				releases = append(releases, rel)
			}
			defer func() {
				for _, r := range releases {
					close(r)
				}
			}()
			noop := func(context.Context) error { return nil }
			for i := range 1000 {
				submit(b, s, Task{ID: fmt.Sprintf("q%04d", i), Type: TestRun, Priority: Priority(1 + i%5), Template: "code-executor", Run: noop})
			}
			if st := s.Stats(); st.Queued != 1000 {
				b.Fatalf("stats %+v", st)
			}
			tpl := "ai-provider"
			if mode == "queue" {
				tpl = "code-executor"
			}
			ds := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				tk := Task{ID: fmt.Sprintf("b%d", i), Type: AIGenerate, Priority: Priority(1 + i%5), Template: tpl, Run: noop}
				start := time.Now()
				h, err := s.Submit(tk)
				ds = append(ds, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if mode == "start" {
					<-h.Done() // in ns/op, not in p50-ns
				}
			}
			b.StopTimer()
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}
