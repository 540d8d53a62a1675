package state

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/uerr"
)

func TestSessionsSaveLoadListArchive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".fluffy", "db")
	db, err := store.Open(context.Background(), store.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	ss := NewSessions(db, func() time.Time { return now })

	old := &Session{ID: "old"}
	if err := ss.Save(old); err != nil {
		t.Fatal(err)
	}
	now = now.Add(40 * 24 * time.Hour)
	cur := &Session{ID: "cur",
		History: []Message{{Role: "user", Content: "add error handling", At: now}}}
	if err := ss.Save(cur); err != nil {
		t.Fatal(err)
	}
	if err := ss.Save(&Session{}); !uerr.HasCode(err, CodeSessionInvalid) {
		t.Fatalf("save without id: %v", err)
	}
	if _, err := ss.Load("nope"); !uerr.HasCode(err, CodeSessionNotFound) {
		t.Fatalf("load missing: %v", err)
	}
	ids, err := ss.ArchiveOld(SessionArchiveAge)
	if err != nil || len(ids) != 1 || ids[0] != "old" {
		t.Fatalf("ArchiveOld = %v, %v", ids, err)
	}
	live, _ := ss.List(false)
	all, _ := ss.List(true)
	if len(live) != 1 || live[0].ID != "cur" || len(all) != 2 {
		t.Fatalf("List: live %v all %v", live, all)
	}
	// Survives a reopen of the real database.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(context.Background(), store.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := NewSessions(db, nil).Load("cur")
	if err != nil || len(got.History) != 1 || got.History[0].Content != "add error handling" {
		t.Fatalf("reloaded %+v %v", got, err)
	}
	o, _ := NewSessions(db, nil).Load("old")
	if !o.Archived() {
		t.Fatalf("old session not archived after reopen")
	}
}
