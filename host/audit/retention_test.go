package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestRetentionByAgeKeepsChainVerifiable(t *testing.T) {
	ctx := context.Background()
	day0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := &fakeClock{t: day0}
	dir := dbDir(t)
	l := openLog(t, dir, func(o *Options) { o.Clock = clk; o.Retention = Retention{MaxAge: 48 * time.Hour, MaxBytes: -1} })
	appendN(t, l, 10, EventSyscall) // ids 1..10, day 0
	clk.Add(24 * time.Hour)
	appendN(t, l, 10, EventSyscall) // ids 11..20, day 1
	clk.Add(48 * time.Hour)
	appendN(t, l, 10, EventSyscall) // ids 21..30, day 3

	rep, err := l.ApplyRetention(ctx)
	must(t, err)
	if len(rep.Removed) != 1 || rep.Removed[0].FromID != 1 || rep.Removed[0].ToID != 10 {
		t.Fatalf("removed = %+v, want ids 1..10", rep.Removed)
	}
	del, err := l.Recent(ctx, 1, EventAuditArchiveDeleted)
	must(t, err)
	if len(del) != 1 || del[0].Metadata[MetaFromID] != "1" || del[0].Metadata[MetaToID] != "10" {
		t.Fatalf("audit_archive_deleted = %+v", del)
	}
	must(t, l.Close())

	l = openLog(t, dir, func(o *Options) { o.Clock = clk })
	defer l.Close()
	if !l.StartupReport().OK() {
		t.Fatalf("startup after retention: %+v", l.StartupReport())
	}
	all, err := l.Verify(ctx, true)
	must(t, err)
	if !all.OK() || all.FromID != 11 || all.Checked != 21 {
		t.Fatalf("Verify(all) after retention = %+v", all)
	}
	var buf bytes.Buffer
	_, err = l.Export(ctx, &buf)
	must(t, err)
	xr, err := VerifyJSONL(ctx, &buf)
	must(t, err)
	if !xr.OK() || xr.FromID != 11 {
		t.Fatalf("export after retention does not verify: %+v", xr)
	}
}

func TestRetentionBySize(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := openLog(t, dbDir(t), func(o *Options) {
		o.Clock = clk
		o.Retention = Retention{MaxAge: -1, MaxBytes: 1 << 20, MinAge: 24 * time.Hour}
	})
	defer l.Close()
	big := strings.Repeat("lorem ipsum ", 60)
	for d := 0; d < 3; d++ {
		for i := 0; i < 700; i++ {
			if _, err := l.Append(ctx, Event{Type: EventToolResult, Output: big}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Add(24 * time.Hour)
	}
	rep, err := l.ApplyRetention(ctx)
	must(t, err)
	if rep.UsageBytes <= 1<<20 || rep.Level != EventAuditStorageCritical {
		t.Fatalf("usage %d level %q, want > 1 MiB and critical", rep.UsageBytes, rep.Level)
	}
	if len(rep.Removed) != 1 || rep.Removed[0].FromID != 1 || rep.Removed[0].ToID != 700 {
		t.Fatalf("removed = %+v, want the oldest day 1..700", rep.Removed)
	}
	for _, typ := range []EventType{EventAuditStorageCritical, EventAuditArchiveDeleted} {
		got, err := l.Recent(ctx, 1, typ)
		if err != nil || len(got) != 1 {
			t.Fatalf("no %s event: %v", typ, err)
		}
	}
	all, err := l.Verify(ctx, true)
	must(t, err)
	if !all.OK() || all.FromID != 701 {
		t.Fatalf("Verify(all) = %+v", all)
	}
	// Under the warning line nothing happens.
	again, err := l.ApplyRetention(ctx)
	must(t, err)
	if len(again.Removed) != 0 {
		t.Fatalf("second run removed %+v", again.Removed)
	}
}

func TestRetentionOptionsValidated(t *testing.T) {
	for _, r := range []Retention{{MaxAge: time.Minute}, {MaxBytes: 1000}} {
		_, err := Open(context.Background(), Options{Dir: dbDir(t), Retention: r})
		if !uerr.HasCode(err, CodeBadRetention) {
			t.Errorf("Open with %+v: %v, want %s", r, err, CodeBadRetention)
		}
	}
}

// A flood of fresh records never erases the records
// before it to satisfy the size bound; retention says so loudly instead.
func TestSizeRetentionNeverRemovesYoungRecords(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := openLog(t, dbDir(t), func(o *Options) { o.Clock = clk; o.Retention = Retention{MaxBytes: 1 << 20} })
	defer l.Close()
	denied, err := l.Append(ctx, Event{Type: EventPolicyUpdate, Caller: "plugin:evil", PolicyDecision: DecisionDenied, DenyReason: "plugins may not update the policy"})
	must(t, err)
	big := strings.Repeat("lorem ipsum ", 60)
	for d := 0; d < 3; d++ {
		for i := 0; i < 700; i++ {
			if _, err := l.Append(ctx, Event{Type: EventToolResult, Output: big}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Add(24 * time.Hour)
	}
	rep, err := l.ApplyRetention(ctx)
	must(t, err)
	if len(rep.Removed) != 0 || !rep.Blocked || rep.Level != EventAuditStorageCritical {
		t.Fatalf("retention report %+v: want nothing removed, blocked, critical", rep)
	}
	crit, err := l.Recent(ctx, 1, EventAuditStorageCritical)
	must(t, err)
	if len(crit) != 1 || crit[0].Metadata[MetaBlocked] == "" {
		t.Fatalf("no loud critical record: %+v", crit)
	}
	got, err := l.Recent(ctx, 1, EventPolicyUpdate)
	if err != nil || len(got) != 1 || got[0].ID != denied.ID || got[0].DenyReason != denied.DenyReason {
		t.Fatalf("the denied policy update is gone: %v %+v", err, got)
	}
}

// A deletion is visible to verify as such: the horizon is reported with
// the audit_archive_deleted record stating it, and a horizon no record
// states (records removed outside retention) is a break.
func TestVerifyReportsRetentionHorizon(t *testing.T) {
	ctx := context.Background()
	day0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := &fakeClock{t: day0}
	dir := dbDir(t)
	l := openLog(t, dir, func(o *Options) { o.Clock = clk; o.Retention = Retention{MaxAge: 48 * time.Hour, MaxBytes: -1} })
	appendN(t, l, 10, EventSyscall)
	clk.Add(72 * time.Hour)
	appendN(t, l, 10, EventSyscall)
	_, err := l.ApplyRetention(ctx)
	must(t, err)
	rep, err := l.Verify(ctx, true)
	must(t, err)
	if !rep.OK() || rep.Horizon == nil || rep.Horizon.FirstKept != 11 || rep.Horizon.RecordedBy == 0 || rep.Horizon.Reason != "age" || rep.Horizon.FromID != 1 {
		t.Fatalf("verify after retention: %+v horizon %+v", rep, rep.Horizon)
	}
	tail, err := l.Verify(ctx, false)
	must(t, err)
	if tail.Horizon == nil || tail.Horizon.FirstKept != 11 {
		t.Fatalf("tail verify hides the horizon: %+v", tail)
	}
	var buf bytes.Buffer
	_, err = l.Export(ctx, &buf)
	must(t, err)
	xr, err := VerifyJSONL(ctx, &buf)
	must(t, err)
	if !xr.OK() || xr.Horizon == nil || xr.Horizon.RecordedBy == 0 {
		t.Fatalf("export verify: %+v", xr)
	}
	must(t, l.Close())

	// Remove records 11..15 by hand and move the horizon as retention
	// would, without the record of it: the chain itself still links.
	withBadger(t, dir, func(txn *badger.Txn) error {
		v := getVal(t, txn, 15)
		var last Hash
		copy(last[:], v[len(v)-hashLen:])
		for id := uint64(11); id <= 15; id++ {
			must(t, txn.Delete(recKey(id)))
		}
		return txn.Set([]byte(keyHorizon), encodeMark(16, last))
	})
	l = openLog(t, dir, func(o *Options) { o.Clock = clk })
	defer l.Close()
	rep, err = l.Verify(ctx, true)
	must(t, err)
	if rep.OK() || rep.FirstBad() != 16 {
		t.Fatalf("an unrecorded removal verified: %+v", rep)
	}
}

// Fields are bounded, with the length and hash of the original.
func TestAuditFieldsBoundedWithHash(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, dbDir(t), nil)
	defer l.Close()
	huge := strings.Repeat("a/", 2<<20) // a 4 MiB path
	md := map[string]string{MetaPath: huge}
	for i := 0; i < 100; i++ {
		md["z"+strconv.Itoa(i)] = "v" // sort after "path": the ones dropped
	}
	r, err := l.Append(ctx, Event{Type: EventSyscall, SyscallType: huge, Caller: huge, DenyReason: huge, Metadata: md})
	must(t, err)
	sum := sha256.Sum256([]byte(huge))
	marker := "…[truncated: " + strconv.Itoa(len(huge)) + " bytes, sha256:" + hex.EncodeToString(sum[:]) + "]"
	cases := []struct {
		name string
		got  string
		max  int
	}{
		{"syscall", r.SyscallType, MaxFieldBytes},
		{"caller", r.Caller, MaxFieldBytes},
		{"deny_reason", r.DenyReason, MaxReasonBytes},
		{"metadata path", r.Metadata[MetaPath], MaxFieldBytes},
	}
	for _, c := range cases {
		if !strings.HasSuffix(c.got, marker) || len(c.got) > c.max+len(marker) {
			t.Errorf("%s: %d bytes, ends %q", c.name, len(c.got), c.got[max(0, len(c.got)-120):])
		}
	}
	if len(r.Metadata) > MaxMetadataKeys+2 || r.Metadata[MetaDropped] == "" { // + dropped count, + genesis
		t.Errorf("metadata kept %d keys", len(r.Metadata))
	}
	recs, err := l.Recent(ctx, 1, EventSyscall)
	must(t, err)
	stored := recs[0]
	if stored.ID != r.ID || stored.SyscallType != r.SyscallType {
		t.Fatal("stored record differs")
	}
	if enc := encodedLen(&stored); enc > 64<<10 {
		t.Fatalf("record encodes to %d bytes", enc)
	}
}
