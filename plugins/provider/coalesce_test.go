package provider

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMerge(t *testing.T) {
	args := func(id, s string) Event { return Event{ToolCallDelta: &ToolCallDelta{CallID: id, ArgumentsDelta: s}} }
	big := strings.Repeat("x", maxMergedDelta)
	cases := []struct {
		name       string
		last, next Event
		merged     bool
		want       Event
	}{
		{"text", Event{TextDelta: "hel"}, Event{TextDelta: "lo"}, true, Event{TextDelta: "hello"}},
		{"reasoning", Event{ReasoningDelta: "a"}, Event{ReasoningDelta: "b"}, true, Event{ReasoningDelta: "ab"}},
		{"one call's arguments", args("c1", `{"a":`), args("c1", `1}`), true, args("c1", `{"a":1}`)},
		{"two calls' arguments", args("c1", `{`), args("c2", `}`), false, args("c1", `{`)},
		{"text then reasoning", Event{TextDelta: "a"}, Event{ReasoningDelta: "b"}, false, Event{TextDelta: "a"}},
		{"text then usage", Event{TextDelta: "a"}, Event{Usage: &Usage{OutputTokens: 1}}, false, Event{TextDelta: "a"}},
		{"over the cap", Event{TextDelta: big}, Event{TextDelta: "y"}, false, Event{TextDelta: big}},
		{"call start is never merged", Event{ToolCallStart: &ToolCallStart{CallID: "c1", Name: "fs_read"}}, args("c1", "{}"), false, Event{ToolCallStart: &ToolCallStart{CallID: "c1", Name: "fs_read"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			last := tc.last
			var before ToolCallDelta
			if tc.last.ToolCallDelta != nil {
				before = *tc.last.ToolCallDelta
			}
			if got := merge(&last, tc.next); got != tc.merged {
				t.Fatalf("merged %v, want %v", got, tc.merged)
			}
			if !reflect.DeepEqual(last, tc.want) {
				t.Errorf("got %+v, want %+v", last, tc.want)
			}
			if tc.last.ToolCallDelta != nil && *tc.last.ToolCallDelta != before {
				t.Errorf("merge wrote through the emitter's pointer: %+v", *tc.last.ToolCallDelta)
			}
		})
	}
}

// burst emits n text deltas and a finish without ever blocking, as a
// plugin does while its upstream's chunks are buffered.
type burst struct {
	fake
	n int
}

func (b burst) Chat(_ context.Context, req ChatRequest, send func(Event) error) error {
	s := NewStream(send, req.RequestID, nil)
	for i := 0; i < b.n; i++ {
		if err := s.Text(fmt.Sprintf("t%d ", i)); err != nil {
			return err
		}
	}
	return s.Finish(Done{StopReason: StopEndTurn})
}

type exactBurst struct{ burst }

func (exactBurst) ExactEvents() bool { return true }

// TestBurstIsMergedOverGRPC runs the v1 and v2 shims over real gRPC: a
// burst of deltas reaches the kernel as far fewer events carrying the
// same text, in order, the first delta on its own; a provider that asks
// for exact events gets one event per delta.
func TestBurstIsMergedOverGRPC(t *testing.T) {
	const n = 5000
	var want strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&want, "t%d ", i)
	}
	for _, tc := range []struct {
		name    string
		version int
		impl    Plugin
		exact   bool
	}{
		{"v2", 2, burst{n: n}, false},
		{"v1", 1, burst{n: n}, false},
		{"v2 exact", 2, exactBurst{burst{n: n}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, tc.version, tc.impl)
			var deltas int
			var first string
			var text strings.Builder
			var done bool
			err := c.Chat(context.Background(), ChatRequest{RequestID: "r1"}, func(e Event) {
				if done {
					t.Errorf("event after done: %+v", e)
				}
				if e.TextDelta != "" {
					if deltas == 0 {
						first = e.TextDelta
					}
					deltas++
					text.WriteString(e.TextDelta)
				}
				done = done || e.Done != nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !done || text.String() != want.String() {
				t.Fatalf("done %v, text of %d bytes, want %d", done, text.Len(), want.Len())
			}
			if first != "t0 " {
				t.Errorf("first delta %q, want it sent on its own", first)
			}
			switch {
			case tc.exact && deltas != n:
				t.Errorf("%d text events, want exactly %d", deltas, n)
			case !tc.exact && deltas > n/4:
				t.Errorf("%d text events for %d deltas pushed in a burst: not merged", deltas, n)
			}
			t.Logf("%d deltas arrived as %d events", n, deltas)
		})
	}
}

func TestCoalescerReportsABrokenStream(t *testing.T) {
	broken := errors.New("transport is closing")
	var mu sync.Mutex
	delivered := 0
	c := newCoalescer(fake{}, func(Event) error {
		mu.Lock()
		defer mu.Unlock()
		delivered++
		if delivered >= 3 {
			return broken
		}
		time.Sleep(100 * time.Microsecond)
		return nil
	})
	var pushErr error
	for i := 0; i < 100000 && pushErr == nil; i++ {
		pushErr = c.push(Event{Usage: &Usage{OutputTokens: int64(i)}}) // never merged
	}
	if !errors.Is(pushErr, broken) {
		t.Errorf("push went on after the stream broke: %v", pushErr)
	}
	if err := c.close(); !errors.Is(err, broken) {
		t.Errorf("close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if delivered != 3 {
		t.Errorf("%d deliveries, want none after the failing third", delivered)
	}
}
