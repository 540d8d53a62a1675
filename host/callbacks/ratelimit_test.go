package callbacks

import (
	"testing"
	"time"
)

// Kernel callbacks are rate-limited per instance; a run
// of refusals is reported once.
func TestCallbackLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newCallbackLimiter(10, 20, func() time.Time { return now })
	cases := []struct {
		name      string
		advance   time.Duration
		calls     int
		allowed   int
		firstRuns int
	}{
		{"burst allowed", 0, 20, 20, 0},
		{"over the burst refused, reported once", 0, 1000, 0, 1},
		{"refill at the rate", time.Second, 100, 10, 1},
		{"a long pause refills only to the burst", time.Hour, 100, 20, 1},
	}
	for _, c := range cases {
		now = now.Add(c.advance)
		allowed, firsts := 0, 0
		for i := 0; i < c.calls; i++ {
			ok, first := l.allow()
			if ok {
				allowed++
			}
			if first {
				firsts++
			}
		}
		if allowed != c.allowed || firsts != c.firstRuns {
			t.Errorf("%s: allowed %d (want %d), runs reported %d (want %d)", c.name, allowed, c.allowed, firsts, c.firstRuns)
		}
	}
}
