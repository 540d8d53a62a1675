package audit

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/uerr"
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
	l := openLog(t, dbDir(t), func(o *Options) { o.Clock = clk; o.Retention = Retention{MaxAge: -1, MaxBytes: 1 << 20} })
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
