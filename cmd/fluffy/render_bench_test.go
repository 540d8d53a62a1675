package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/internal/pty"
)

// benchEvents is a task's mix as the CLI receives it: mostly streamed text,
// every 20th event a tool call (executing, then its result), every 200th a
// state change.
func benchEvents(n int) []agent.Event {
	evs := make([]agent.Event, 0, n)
	for i := 0; len(evs) < n; i++ {
		base := agent.Event{Seq: int64(i + 1), Session: "bench", Task: "t1", Turn: 1 + i/100, Time: time.Now()}
		switch {
		case i%200 == 199:
			base.Type = agent.EventStateChanged
			base.State = &agent.StateEvent{From: "red", To: "green", Mode: "strict", Reason: "tests pass"}
		case i%20 == 18:
			base.Type = agent.EventToolExecuting
			base.Tool = &agent.ToolEvent{CallID: fmt.Sprint("c", i), Name: "fs.read", Target: "internal/config/parse.go"}
		case i%20 == 19:
			base.Type = agent.EventToolResult
			base.Tool = &agent.ToolEvent{CallID: fmt.Sprint("c", i-1), Name: "fs.read", Target: "internal/config/parse.go", DurationMS: 9, OK: true, Summary: "Read 85 lines"}
		default:
			base.Type = agent.EventTextDelta
			base.Text = "some streamed model text "
		}
		evs = append(evs, base)
	}
	return evs
}

// benchPTY opens a pseudo-terminal, drains its master end, and returns its
// slave end: what the CLI writes to when a person watches.
func benchPTY(b *testing.B) *os.File {
	m, s, err := pty.Open()
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, m) }()
	b.Cleanup(func() { s.Close(); m.Close(); wg.Wait() })
	return s
}

// BenchmarkEventsToTerminal measures the event-stream throughput to
// a terminal: the REPL's renderer (colour on, as at a terminal) and
// `--json`'s encoder, each writing the same 10 000-event task mix to a real
// pseudo-terminal. Reported as events/s.
func BenchmarkEventsToTerminal(b *testing.B) {
	evs := benchEvents(10000)
	for _, tc := range []struct {
		name string
		sink func(w io.Writer) func(agent.Event)
	}{
		{"renderer", func(w io.Writer) func(agent.Event) {
			// tty false: the spinner's timer goroutine is not part of the
			// throughput (it redraws at most every 100 ms).
			r := newRenderer(w, true, false)
			return r.Event
		}},
		{"json", func(w io.Writer) func(agent.Event) {
			enc := json.NewEncoder(w)
			return func(ev agent.Event) { _ = enc.Encode(ev) }
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tty := benchPTY(b)
			sink := tc.sink(tty)
			b.ResetTimer()
			for range b.N {
				for _, ev := range evs {
					sink(ev)
				}
			}
			b.ReportMetric(float64(b.N*len(evs))/b.Elapsed().Seconds(), "events/s")
		})
	}
}
