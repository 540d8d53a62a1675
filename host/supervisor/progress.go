package supervisor

import (
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// Progress bounds.
const (
	// DefaultProgressInterval is the least time between two progress
	// events passed on for one call.
	DefaultProgressInterval = 100 * time.Millisecond
	// MaxProgressMessage bounds one progress message (escaped).
	MaxProgressMessage = 256
)

// coalescer passes a plugin's progress on at most once per interval: an
// event arriving sooner replaces the pending one, and flush delivers the
// pending event when the call ends, so a flood of a million events costs
// the caller a few dozen and the latest state is never lost. Messages are
// escaped and bounded (textsafe.Line) before anyone sees them.
type coalescer struct {
	mu       sync.Mutex
	out      func(tool.Progress)
	interval time.Duration
	now      func() time.Time
	last     time.Time
	pending  *tool.Progress
	// Received and Delivered count events, for the caller's figures.
	Received, Delivered int
}

func newCoalescer(out func(tool.Progress), interval time.Duration, now func() time.Time) *coalescer {
	if interval <= 0 {
		interval = DefaultProgressInterval
	}
	return &coalescer{out: out, interval: interval, now: now}
}

func (c *coalescer) add(p tool.Progress) {
	p.Message = textsafe.Line(p.Message, MaxProgressMessage)
	if p.Fraction != p.Fraction || p.Fraction < 0 { // NaN or negative
		p.Fraction = 0
	} else if p.Fraction > 1 {
		p.Fraction = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Received++
	t := c.now()
	if !c.last.IsZero() && t.Sub(c.last) < c.interval {
		c.pending = &p
		return
	}
	c.last, c.pending = t, nil
	c.Delivered++
	c.out(p)
}

// flush delivers the event held back last, if any.
func (c *coalescer) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending != nil {
		c.Delivered++
		c.out(*c.pending)
		c.pending = nil
	}
}
