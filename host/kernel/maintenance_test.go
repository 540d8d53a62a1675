package kernel

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
)

type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func removedBy(ctx context.Context, t *testing.T, l interface {
	Query(context.Context, audit.Filter) ([]audit.Record, error)
}, reason string) []audit.Record {
	t.Helper()
	recs, err := l.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventAuditArchiveDeleted}})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, r := range recs {
		if r.Metadata["reason"] == reason {
			out = append(out, r)
		}
	}
	return out
}

// Retention ran only when a kernel opened, so a kernel
// that ran for days kept records past their age. A running kernel now
// applies it every RetentionInterval, to the project and the home log,
// without a restart.
func TestRunningKernelAppliesRetention(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	ctx := context.Background()
	clk := &stepClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, AuditClock: clk,
		AuditRetention: audit.Retention{MaxAge: 2 * time.Hour, MaxBytes: -1}, RetentionInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	old, err := k.Audit.Append(ctx, audit.Event{Type: audit.EventSyscall, SyscallType: "fs.read", Caller: "test", PolicyDecision: audit.DecisionAllowed})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.HomeAudit.Append(ctx, audit.Event{Type: audit.EventSyscall, Caller: "test"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // several ticks: nothing is old enough yet
	if got := removedBy(ctx, t, k.Audit, "age"); len(got) != 0 {
		t.Fatalf("retention removed young records: %+v", got)
	}
	clk.advance(3 * time.Hour)
	waitFor(t, func() bool {
		return len(removedBy(ctx, t, k.Audit, "age")) > 0 && len(removedBy(ctx, t, k.HomeAudit, "age")) > 0
	}, "the running kernel to apply age retention to both logs")
	recs, err := k.Audit.Query(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.ID == old.ID {
			t.Fatalf("record %d, older than the 2h retention, is still there", old.ID)
		}
	}
	if rep, err := k.Audit.Verify(ctx, true); err != nil || !rep.OK() {
		t.Fatalf("chain after periodic retention: %+v %v", rep, err)
	}
}

// The periodic run keeps the rule of a run at start: the size bound never
// removes records younger than MinAge; it says it is blocked instead, and
// removes them once they are old enough.
func TestPeriodicRetentionKeepsYoungRecordsUnderTheSizeBound(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	ctx := context.Background()
	clk := &stepClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, AuditClock: clk,
		AuditRetention:    audit.Retention{MaxAge: -1, MaxBytes: 1 << 20, MinAge: 2 * time.Hour},
		RetentionInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	first, err := k.Audit.Append(ctx, audit.Event{Type: audit.EventSyscall, SyscallType: "fs.read", Caller: "test", PolicyDecision: audit.DecisionAllowed})
	if err != nil {
		t.Fatal(err)
	}
	// Fields are bounded (1 KiB a value, 32 metadata entries), so a record
	// carries ~25 KiB at most: 60 of them are well over 1 MiB.
	for i := 0; i < 60; i++ {
		md := map[string]string{}
		for j := 0; j < 25; j++ {
			md[fmt.Sprintf("pad%02d", j)] = strings.Repeat(fmt.Sprintf("%04d%02d", i, j), 160)
		}
		if _, err := k.Audit.Append(ctx, audit.Event{Type: audit.EventSyscall, SyscallType: "fs.read", Caller: "test",
			PolicyDecision: audit.DecisionAllowed, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool {
		recs, _ := k.Audit.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventAuditStorageCritical}})
		for _, r := range recs {
			if r.Metadata[audit.MetaBlocked] != "" {
				return true
			}
		}
		return false
	}, "the running kernel to report the size bound blocked by young records")
	if got := removedBy(ctx, t, k.Audit, "size"); len(got) != 0 {
		t.Fatalf("size retention removed records younger than MinAge: %+v", got)
	}
	clk.advance(24 * time.Hour) // a new UTC day: the old one may go
	waitFor(t, func() bool { return len(removedBy(ctx, t, k.Audit, "size")) > 0 }, "size retention once the records are old enough")
	recs, err := k.Audit.Query(ctx, audit.Filter{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || recs[0].ID == first.ID {
		t.Fatalf("the oldest record is still there after size retention: %+v", recs)
	}
}
