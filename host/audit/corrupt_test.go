package audit

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestDamagedDatabaseStillStarts truncates the newest table file of a real
// audit database: Open must succeed, report the damage as an
// audit_chain_break that begins a new segment, keep the records of the
// undamaged table, and name the first missing id.
func TestDamagedDatabaseStillStarts(t *testing.T) {
	ctx := context.Background()
	dir := dbDir(t)
	// Damaged table files.
	for i := 0; i < 2; i++ { // two sessions → two tables: ids 1..60, 61..120
		l := openLog(t, dir, nil)
		appendN(t, l, 60, EventToolExecute)
		must(t, l.Close())
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	sort.Strings(ssts)
	if len(ssts) != 2 {
		t.Fatalf("setup: %d tables", len(ssts))
	}
	fi, _ := os.Stat(ssts[1])
	must(t, os.Truncate(ssts[1], fi.Size()/3))

	l := openLog(t, dir, nil)
	defer l.Close()
	if l.db.Recovery() == nil {
		t.Fatal("the store did not report recovering the damaged database")
	}
	brk, err := l.Recent(ctx, 1, EventAuditChainBreak)
	must(t, err)
	if len(brk) != 1 || brk[0].Metadata["store_quarantine"] == "" || !isGenesis(&brk[0]) {
		t.Fatalf("audit_chain_break = %+v", brk)
	}
	// The head mark was in the lost table too, so the new segment continues
	// right after the newest salvaged record; the break record documents it.
	if brk[0].ID != 61 {
		t.Fatalf("break record id %d, want 61", brk[0].ID)
	}
	kept, err := l.Query(ctx, Filter{Types: []EventType{EventToolExecute}})
	must(t, err)
	if len(kept) != 60 || kept[0].ID != 1 || kept[59].ID != 60 {
		t.Fatalf("kept %d records (want the 60 of the undamaged table)", len(kept))
	}
	rep, err := l.Verify(ctx, true)
	must(t, err)
	if !rep.OK() || len(rep.Segments) != 2 || rep.Segments[1] != 61 || len(rep.RecordedBreaks) != 1 || rep.RecordedBreaks[0] != 61 {
		t.Fatalf("Verify(all) = %+v, want a valid chain with a recorded break starting segment 61", rep)
	}
	// The move aside is shown by verify, tail and all: where the files
	// went, and which were damaged.
	for _, all := range []bool{false, true} {
		rep, err := l.Verify(ctx, all)
		must(t, err)
		if len(rep.Quarantines) != 1 {
			t.Fatalf("Verify(%v).Quarantines = %+v, want the one move", all, rep.Quarantines)
		}
		q := rep.Quarantines[0]
		if q.ID != 61 || q.MovedTo != l.db.Recovery().Quarantine || q.BadFiles != filepath.Base(ssts[1]) || q.Reason == "" {
			t.Fatalf("quarantine = %+v, want id 61, moved to %s, bad %s", q, l.db.Recovery().Quarantine, filepath.Base(ssts[1]))
		}
		if _, err := os.Stat(q.MovedTo); err != nil {
			t.Fatalf("quarantine directory: %v", err)
		}
	}
	if _, err := l.Append(ctx, Event{Type: EventKernelStart}); err != nil {
		t.Fatalf("append to the new segment: %v", err)
	}
}
