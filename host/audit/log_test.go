package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestAppendChainsAndReopenContinues(t *testing.T) {
	dir := dbDir(t)
	clk := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	l := openLog(t, dir, func(o *Options) { o.Clock = clk })
	recs := appendN(t, l, 5, EventToolExecute)
	if recs[0].ID != 1 || recs[4].ID != 5 {
		t.Fatalf("ids = %d..%d, want 1..5", recs[0].ID, recs[4].ID)
	}
	if recs[0].PrevHash != GenesisHash(1_700_000_000_000) {
		t.Fatalf("first record prev_hash = %s, want genesis of the start time", recs[0].PrevHash)
	}
	if recs[0].Metadata[MetaGenesis] != "1700000000000" {
		t.Fatalf("genesis record metadata = %v", recs[0].Metadata)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].PrevHash != recs[i-1].Hash {
			t.Fatalf("record %d prev_hash does not link to record %d", recs[i].ID, recs[i-1].ID)
		}
		if computeHash(&recs[i]) != recs[i].Hash {
			t.Fatalf("record %d hash is not SHA-256 of its encoding", recs[i].ID)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, nil)
	defer l.Close()
	if !l.StartupReport().OK() {
		t.Fatalf("startup report on a clean log: %+v", l.StartupReport())
	}
	r, err := l.Append(context.Background(), Event{Type: EventPolicyUpdate, Caller: "user"})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != 6 || r.PrevHash != recs[4].Hash {
		t.Fatalf("after reopen: id %d prev %s, want 6 linked to %s", r.ID, r.PrevHash, recs[4].Hash)
	}
	rep, err := l.Verify(context.Background(), true)
	if err != nil || !rep.OK() || rep.Checked != 6 || len(rep.Segments) != 1 {
		t.Fatalf("Verify all: %+v, %v", rep, err)
	}
}

func TestAppendRejectsBadEvents(t *testing.T) {
	l := openLog(t, dbDir(t), nil)
	defer l.Close()
	cases := []Event{
		{},
		{Type: "Has Spaces"},
		{Type: EventType(strings.Repeat("x", 65))},
		{Type: EventToolExecute, Metadata: map[string]string{MetaGenesis: "1"}},
	}
	for _, ev := range cases {
		if _, err := l.Append(context.Background(), ev); !uerr.HasCode(err, CodeBadEvent) {
			t.Errorf("Append(%+v) error = %v, want %s", ev, err, CodeBadEvent)
		}
	}
}

func TestAppendRedactsAndTruncates(t *testing.T) {
	l := openLog(t, dbDir(t), nil)
	defer l.Close()
	in := "curl -H 'Authorization: Bearer abcdef0123456789' " + strings.Repeat("x", 600) + " sk-ant-api03-SHOULDNOTSURVIVE"
	r, err := l.Append(context.Background(), Event{Type: EventToolExecute, Input: in,
		Output: "key AKIAIOSFODNN7EXAMPLE", DenyReason: "saw ghp_0123456789abcdefABCDEF0123",
		Metadata: map[string]string{"env": "OPENAI_API_KEY=sk-proj-0123456789abcdefghij"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Query(context.Background(), Filter{})
	if err != nil || len(got) != 1 {
		t.Fatalf("Query: %v %d", err, len(got))
	}
	s := got[0]
	if len([]rune(s.InputSummary)) > SummaryLimit {
		t.Errorf("input summary has %d runes", len([]rune(s.InputSummary)))
	}
	for _, leak := range []string{"abcdef0123456789", "SHOULDNOTSURVIVE", "IOSFODNN7EXAMPLE", "0123456789abcdefABCDEF", "0123456789abcdefghij"} {
		blob, _ := json.Marshal(s)
		if bytes.Contains(blob, []byte(leak)) {
			t.Errorf("stored record leaks %q: %s", leak, blob)
		}
	}
	if s.Hash != r.Hash {
		t.Errorf("stored hash differs from returned hash")
	}
}

func TestBufferedEventsFlushByCountTimerAndClose(t *testing.T) {
	countStored := func(l *Log) int {
		n := 0
		_ = l.db.View(func(txn *badger.Txn) error {
			io := badger.DefaultIteratorOptions
			io.Prefix = []byte(prefixRecord)
			it := txn.NewIterator(io)
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				n++
			}
			return nil
		})
		return n
	}
	waitStored := func(l *Log, want int, within time.Duration) bool {
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) {
			if countStored(l) >= want {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		return false
	}

	t.Run("by count", func(t *testing.T) {
		l := openLog(t, dbDir(t), func(o *Options) { o.FlushInterval = time.Hour; o.FlushEntries = 100 })
		defer l.Close()
		appendN(t, l, 99, EventSyscall)
		time.Sleep(50 * time.Millisecond)
		if n := countStored(l); n != 0 {
			t.Fatalf("%d records written before the 100-entry threshold", n)
		}
		appendN(t, l, 1, EventSyscall)
		if !waitStored(l, 100, 5*time.Second) {
			t.Fatalf("100 buffered records not written; have %d", countStored(l))
		}
	})
	t.Run("by timer", func(t *testing.T) {
		l := openLog(t, dbDir(t), func(o *Options) { o.FlushInterval = 200 * time.Millisecond })
		defer l.Close()
		appendN(t, l, 3, EventSyscall)
		if !waitStored(l, 3, 2*time.Second) {
			t.Fatalf("buffered records not written by the timer; have %d", countStored(l))
		}
	})
	t.Run("security event flushes earlier buffered ones", func(t *testing.T) {
		l := openLog(t, dbDir(t), func(o *Options) { o.FlushInterval = time.Hour })
		defer l.Close()
		appendN(t, l, 7, EventSyscall)
		if _, err := l.Append(context.Background(), Event{Type: EventMergeApproved}); err != nil {
			t.Fatal(err)
		}
		if n := countStored(l); n != 8 {
			t.Fatalf("after a security append %d records are stored, want 8 (prefix property)", n)
		}
	})
	t.Run("on close", func(t *testing.T) {
		dir := dbDir(t)
		l := openLog(t, dir, func(o *Options) { o.FlushInterval = time.Hour })
		appendN(t, l, 42, EventSyscall)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(context.Background(), Event{Type: EventSyscall}); !uerr.HasCode(err, CodeClosed) {
			t.Fatalf("Append after Close: %v, want %s", err, CodeClosed)
		}
		l = openLog(t, dir, nil)
		defer l.Close()
		if n := countStored(l); n != 42 {
			t.Fatalf("after close+reopen %d records, want 42", n)
		}
	})
}

func TestQueryFiltersAndRecent(t *testing.T) {
	clk := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := openLog(t, dbDir(t), func(o *Options) { o.Clock = clk })
	defer l.Close()
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		ev := Event{Type: EventSyscall, SessionID: "s1"}
		if i%3 == 0 {
			ev = Event{Type: EventPolicyDecision, SessionID: "s2", SyscallType: "fs.write", PolicyDecision: DecisionDenied,
				PolicyRule: "no-secrets", Metadata: map[string]string{MetaPath: "/workspace/.env"}}
		}
		if _, err := l.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Minute)
	}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name  string
		f     Filter
		want  int
		first uint64
	}{
		{"all", Filter{}, 30, 1},
		{"type", Filter{Types: []EventType{EventPolicyDecision}}, 10, 1},
		{"session", Filter{SessionID: "s1"}, 20, 2},
		{"since", Filter{Since: t0.Add(20 * time.Minute)}, 10, 21},
		{"until", Filter{Until: t0.Add(4 * time.Minute)}, 5, 1},
		{"limit oldest", Filter{Limit: 4}, 4, 1},
		{"limit newest", Filter{Limit: 4, Newest: true}, 4, 27},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := l.Query(ctx, c.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.want || got[0].ID != c.first {
				t.Fatalf("got %d records starting at %d, want %d starting at %d", len(got), got[0].ID, c.want, c.first)
			}
			for i := 1; i < len(got); i++ {
				if got[i].ID <= got[i-1].ID {
					t.Fatalf("not oldest first: %d after %d", got[i].ID, got[i-1].ID)
				}
			}
		})
	}
	recent, err := l.Recent(ctx, 3, EventPolicyDecision)
	if err != nil || len(recent) != 3 {
		t.Fatalf("Recent: %v %d", err, len(recent))
	}
	if recent[0].ID != 22 || recent[2].ID != 28 || recent[2].PolicyRuleName != "no-secrets" || recent[2].Metadata[MetaPath] != "/workspace/.env" {
		t.Fatalf("Recent = %+v", recent)
	}
}

func TestExportVerifiesOnItsOwn(t *testing.T) {
	l := openLog(t, dbDir(t), nil)
	defer l.Close()
	ctx := context.Background()
	appendN(t, l, 50, EventToolResult)
	if _, err := l.Append(ctx, Event{Type: EventToolExecute, Input: "ünïcödé \xff bytes", Metadata: map[string]string{"b": "2", "a": "1"}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := l.Export(ctx, &buf)
	if err != nil || n != 51 {
		t.Fatalf("Export: %d, %v", n, err)
	}
	rep, err := VerifyJSONL(ctx, bytes.NewReader(buf.Bytes()))
	if err != nil || !rep.OK() || rep.Checked != 51 {
		t.Fatalf("VerifyJSONL of a fresh export: %+v %v", rep, err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	tamper := []struct {
		name    string
		edit    func([]string) []string
		firstID uint64
	}{
		{"edit a field", func(ls []string) []string {
			ls[11] = strings.Replace(ls[11], `"read a file"`, `"read another file"`, 1)
			return ls
		}, 11},
		{"drop a line", func(ls []string) []string { return append(ls[:21:21], ls[22:]...) }, 21},
		{"swap two lines", func(ls []string) []string { ls[30], ls[31] = ls[31], ls[30]; return ls }, 30},
		{"garbage line", func(ls []string) []string { ls[40] = "{not json"; return ls }, 40},
		{"drop the last line", func(ls []string) []string { return ls[:len(ls)-1] }, 0},
	}
	for _, tc := range tamper {
		t.Run(tc.name, func(t *testing.T) {
			ls := tc.edit(append([]string(nil), lines...))
			rep, err := VerifyJSONL(ctx, strings.NewReader(strings.Join(ls, "\n")))
			if err != nil {
				t.Fatal(err)
			}
			if tc.firstID == 0 {
				// A file alone cannot show that its tail was cut: documented limit.
				if !rep.OK() || rep.Checked != 50 {
					t.Fatalf("tail cut: %+v", rep)
				}
				return
			}
			if rep.OK() || rep.FirstBad() != tc.firstID {
				t.Fatalf("first bad id = %d (%+v), want %d", rep.FirstBad(), rep.Breaks, tc.firstID)
			}
		})
	}
	if _, err := VerifyJSONL(ctx, strings.NewReader("")); !uerr.HasCode(err, CodeBadExport) {
		t.Fatalf("empty export: %v", err)
	}
}
