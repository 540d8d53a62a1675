package audit

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/redact"
)

// buildForBench encodes a typical record without a database.
func (l *Log) buildForBench(ev Event) (Record, error) {
	if l.red == nil {
		l.red = redact.New()
	}
	return l.build(ev)
}

// benchEvent is a typical operational record (~250 bytes encoded).
func benchEvent(t EventType) Event {
	return Event{Type: t, SyscallType: "fs.read", ToolName: "read_file", Caller: "tool-fs@1.2.0",
		SessionID: "0b7c6a0e-session", SessionMode: "strict", State: "code_writing",
		PolicyDecision: DecisionAllowed, PolicyRule: "workspace-read",
		Input: "read /workspace/internal/parser/config.go lines 1-200", Output: "200 lines, 6.1 KiB",
		Duration: 3 * time.Millisecond, SandboxID: "fluffy-l2-7f3a", Metadata: map[string]string{"path": "/workspace/internal/parser/config.go"}}
}

func reportRate(b *testing.B, n int64) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkAppendBuffered: operational events from one goroutine; the timer
// includes flushing them all to badger.
func BenchmarkAppendBuffered(b *testing.B) {
	l := openLog(b, dbDir(b), nil)
	ctx := context.Background()
	ev := benchEvent(EventToolExecute)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportRate(b, int64(b.N))
	l.Close()
}

// BenchmarkBaselineWriteBatch writes the same bytes (already encoded, no
// hashing, no chain) with a raw badger WriteBatch: the floor the buffered
// path is compared against.
func BenchmarkBaselineWriteBatch(b *testing.B) {
	db, err := store.Open(context.Background(), store.Options{Dir: dbDir(b)})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	r, _ := (&Log{red: nil}).buildForBench(benchEvent(EventToolExecute))
	val := seal(&r, nil)
	b.ResetTimer()
	for from := 0; from < b.N; from += 100 {
		err := db.WriteBatch(func(wb *badger.WriteBatch) error {
			for i := from; i < min(from+100, b.N); i++ {
				if err := wb.Set(binary.BigEndian.AppendUint64([]byte(prefixRecord), uint64(i+1)), val); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRate(b, int64(b.N))
}

// BenchmarkAppendDurableSerial: one goroutine, each security event synced
// before the next.
func BenchmarkAppendDurableSerial(b *testing.B) {
	l := openLog(b, dbDir(b), nil)
	ctx := context.Background()
	ev := benchEvent(EventCapabilityIssued)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRate(b, int64(b.N))
	l.Close()
}

// BenchmarkAppendDurable16: 16 goroutines appending security events;
// concurrent ones share an fsync (group commit).
func BenchmarkAppendDurable16(b *testing.B) {
	l := openLog(b, dbDir(b), nil)
	ctx := context.Background()
	ev := benchEvent(EventCapabilityIssued)
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := l.Append(ctx, ev); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	reportRate(b, int64(b.N))
	l.Close()
}

// BenchmarkBaselineSyncedBatch16 is the durable baseline: 16 goroutines each
// writing one raw record with badger's own synced transaction.
func BenchmarkBaselineSyncedTxn16(b *testing.B) {
	dir := dbDir(b)
	db, err := store.Open(context.Background(), store.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	r, _ := (&Log{}).buildForBench(benchEvent(EventCapabilityIssued))
	val := seal(&r, nil)
	var next atomic.Uint64
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id := next.Add(1)
				if id > uint64(b.N) {
					return
				}
				if err := db.WriteBatch(func(wb *badger.WriteBatch) error { return wb.Set(recKey(id), val) }); err != nil {
					b.Error(err)
					return
				}
				if err := db.Sync(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	reportRate(b, int64(b.N))
}

// BenchmarkVerify1M verifies a chain of 1 000 000 records (built once,
// outside the timer) per iteration; "records/s" is the verification rate.
func BenchmarkVerify1M(b *testing.B) {
	const n = 1_000_000
	dir := dbDir(b)
	l := openLog(b, dir, nil)
	ctx := context.Background()
	ev := benchEvent(EventToolResult)
	for i := 0; i < n; i++ {
		if _, err := l.Append(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	l = openLog(b, dir, nil)
	defer l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := l.Verify(ctx, true)
		if err != nil || !rep.OK() || rep.Checked != n {
			b.Fatalf("verify: %+v %v", rep, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/1M")
}

// BenchmarkPrepareRecord is the audit log's own CPU per operational record,
// without badger: validation, redaction pre-checks, canonical encoding,
// SHA-256 and the key (what Append does besides taking the lock and
// queueing the record).
func BenchmarkPrepareRecord(b *testing.B) {
	l := &Log{red: redact.New()}
	ev := benchEvent(EventToolExecute)
	b.ReportAllocs()
	var id uint64
	for b.Loop() {
		rec, err := l.build(ev)
		if err != nil {
			b.Fatal(err)
		}
		id++
		rec.ID = id
		if k, v := sealWithKey(&rec); len(k) == 0 || len(v) == 0 {
			b.Fatal("empty")
		}
	}
}
