package audit

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/store"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openLog(t testing.TB, dir string, mod func(*Options)) *Log {
	t.Helper()
	o := Options{Dir: dir}
	if mod != nil {
		mod(&o)
	}
	l, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func appendN(t testing.TB, l *Log, n int, typ EventType) []Record {
	t.Helper()
	out := make([]Record, 0, n)
	for i := 0; i < n; i++ {
		r, err := l.Append(context.Background(), Event{Type: typ, ToolName: "fs.read", Input: "read a file", Metadata: map[string]string{"i": string(rune('a' + i%26))}})
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, r)
	}
	return out
}

// withBadger opens the database directory raw (the log must be closed) and
// runs f in a read-write transaction: the tamper tests edit stored bytes.
func withBadger(t *testing.T, dir string, f func(txn *badger.Txn) error) {
	t.Helper()
	db, err := store.Open(context.Background(), store.Options{Dir: dir, NoRecover: true})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer db.Close()
	if err := db.Update(f); err != nil {
		t.Fatalf("tamper: %v", err)
	}
}

func dbDir(t testing.TB) string { return filepath.Join(t.TempDir(), ".fluffy", "db") }
