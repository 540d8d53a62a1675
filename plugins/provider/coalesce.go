package provider

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// flushEvery bounds how long a streamed event may wait in a plugin while
// its decode loop works through a backlog of upstream chunks.
const flushEvery = time.Millisecond

// maxMergedDelta caps one merged text, reasoning or argument delta.
const maxMergedDelta = 64 << 10

// ExactEvents is implemented by a provider whose events must reach the
// kernel one by one, as it emits them (provider-replay: a cassette
// replays the recorded events byte for byte). Others have consecutive
// deltas merged while they wait together (see coalescer).
type ExactEvents interface {
	ExactEvents() bool
}

// coalescer carries a plugin's streamed events to the kernel, merging
// consecutive deltas that wait together.
//
// Why: a provider plugin runs with GOMAXPROCS=1 in half a CPU, and its
// decode loop never blocks while the upstream's chunks are buffered. One
// gRPC message (and write) per chunk, 200 for a 200-delta answer, kept
// the plugin at its CPU limit for most of a turn, and gRPC's writer
// waited for the runtime's 10 ms preemption unless the loop yielded.
//
// So: an event pushed when nothing is queued or being sent, and nothing
// was sent for flushEvery, is sent at once and the loop yields, so the
// first delta of a burst is on the wire without delay. Events pushed
// while that is not so queue, consecutive deltas of one kind merged, and
// a sender goroutine takes the queue when the loop blocks on the upstream
// (at once: nothing waits for more data to arrive) or yields, which it
// does once flushEvery has passed since the last take.
type coalescer struct {
	deliver func(Event) error
	exact   bool // send each event as pushed, never merge

	mu       sync.Mutex
	queue    []Event
	sending  bool      // a deliver call is under way
	err      error     // the first delivery error; the stream is broken
	closed   bool      // no more pushes; the sender returns when idle
	lastTake time.Time // when events were last taken to be sent

	wake    chan struct{} // capacity 1
	stopped chan struct{} // closed when the sender has returned
}

func newCoalescer(impl Plugin, deliver func(Event) error) *coalescer {
	c := &coalescer{deliver: deliver, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	if x, ok := impl.(ExactEvents); ok && x.ExactEvents() {
		c.exact = true
		close(c.stopped)
		return c
	}
	go c.run()
	return c
}

// push sends or queues e. It returns the error of the stream to the
// kernel once one has failed. Only the turn's goroutine calls it (as it
// called gRPC's Send before), so nothing is queued while it sends.
func (c *coalescer) push(e Event) error {
	if c.exact {
		err := c.deliver(e)
		runtime.Gosched() // let gRPC's writer put it on the wire now
		return err
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	if !c.sending && len(c.queue) == 0 && time.Since(c.lastTake) >= flushEvery {
		c.sending, c.lastTake = true, time.Now()
		c.mu.Unlock()
		err := c.deliver(e)
		// Twice: gRPC's writer goroutine yields once itself before it
		// flushes a write smaller than its batch size, and this loop may
		// then not yield again for flushEvery.
		runtime.Gosched()
		runtime.Gosched()
		c.mu.Lock()
		c.sending = false
		if err != nil && c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
		return err
	}
	if n := len(c.queue); n == 0 || !merge(&c.queue[n-1], e) {
		c.queue = append(c.queue, e)
	}
	yield := time.Since(c.lastTake) >= flushEvery
	c.mu.Unlock()
	c.signal()
	if yield {
		runtime.Gosched()
	}
	return nil
}

func (c *coalescer) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// close sends what is queued, stops the sender and returns the first
// delivery error.
func (c *coalescer) close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.signal()
	<-c.stopped
	return c.err
}

func (c *coalescer) run() {
	defer close(c.stopped)
	for range c.wake {
		for {
			c.mu.Lock()
			if c.sending || len(c.queue) == 0 || c.err != nil {
				done := c.closed
				c.mu.Unlock()
				if done {
					return
				}
				break
			}
			q := c.queue
			c.queue, c.sending, c.lastTake = nil, true, time.Now()
			c.mu.Unlock()
			var err error
			for _, e := range q {
				if err = c.deliver(e); err != nil {
					break
				}
			}
			c.mu.Lock()
			c.sending = false
			if err != nil && c.err == nil {
				c.err = err
			}
			c.mu.Unlock()
		}
	}
}

// merge appends next to last when both are a lone delta of the same kind
// (text, reasoning, or one call's arguments) and the result stays within
// maxMergedDelta; it reports whether it did.
func merge(last *Event, next Event) bool {
	switch {
	case onlyText(*last) && onlyText(next):
		if len(last.TextDelta)+len(next.TextDelta) > maxMergedDelta {
			return false
		}
		last.TextDelta += next.TextDelta
	case onlyReasoning(*last) && onlyReasoning(next):
		if len(last.ReasoningDelta)+len(next.ReasoningDelta) > maxMergedDelta {
			return false
		}
		last.ReasoningDelta += next.ReasoningDelta
	case onlyArgs(*last) && onlyArgs(next) && last.ToolCallDelta.CallID == next.ToolCallDelta.CallID:
		if len(last.ToolCallDelta.ArgumentsDelta)+len(next.ToolCallDelta.ArgumentsDelta) > maxMergedDelta {
			return false
		}
		d := *last.ToolCallDelta // never write through the emitter's pointer
		d.ArgumentsDelta += next.ToolCallDelta.ArgumentsDelta
		last.ToolCallDelta = &d
	default:
		return false
	}
	return true
}

func onlyText(e Event) bool { return e.TextDelta != "" && e == Event{TextDelta: e.TextDelta} }
func onlyReasoning(e Event) bool {
	return e.ReasoningDelta != "" && e == Event{ReasoningDelta: e.ReasoningDelta}
}
func onlyArgs(e Event) bool {
	return e.ToolCallDelta != nil && e == Event{ToolCallDelta: e.ToolCallDelta}
}

// serveTurn runs impl's turn for a shim, sending its events with deliver
// (through a coalescer) up to the first done or error. A failure the
// plugin returns without having sent one is sent as a structured error
// event, not a broken stream, so the kernel can show what/why/fix.
func serveTurn(ctx context.Context, impl Plugin, req ChatRequest, deliver func(Event) error) error {
	c := newCoalescer(impl, deliver)
	finished := false
	err := impl.Chat(ctx, req, func(e Event) error {
		if finished {
			return nil
		}
		if e.Done != nil || e.Err != nil {
			finished = true
		}
		return c.push(e)
	})
	if serr := c.close(); serr != nil && ctx.Err() == nil {
		return serr // the stream to the kernel broke
	}
	if err != nil && !finished && ctx.Err() == nil {
		return deliver(Event{Err: uerr.From(err)})
	}
	return ctx.Err()
}
