package state

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
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

// TestSessionsCurrentPointer: a project without a pointer gets its first
// session (the pre-pointer id) as current; Start, Archive and Resume move
// the pointer in one transaction each, and List never shows the pointer.
func TestSessionsCurrentPointer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".fluffy", "db")
	db, err := store.Open(context.Background(), store.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ss := NewSessions(db, nil)
	cur, err := ss.Current("kernel")
	if err != nil || cur.ID != "kernel" || cur.CreatedAt.IsZero() {
		t.Fatalf("first Current = %+v, %v", cur, err)
	}
	if _, err := ss.Start("kernel"); !uerr.HasCode(err, CodeSessionInvalid) {
		t.Fatalf("Start of an existing id: %v", err)
	}
	if _, err := ss.Start("s2"); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name    string
		do      func() error
		current string
		code    string
	}{
		{"start moved the pointer", func() error { return nil }, "s2", ""},
		{"archive elsewhere keeps it", func() error { return ss.Archive("kernel", "") }, "s2", ""},
		{"archive unknown", func() error { return ss.Archive("nope", "x") }, "s2", CodeSessionNotFound},
		{"archive current to next", func() error { return ss.Archive("s2", "s3") }, "s3", ""},
		{"resume unknown", func() error { _, err := ss.Resume("nope"); return err }, "s3", CodeSessionNotFound},
		{"resume archived", func() error { _, err := ss.Resume("kernel"); return err }, "kernel", ""},
		{"bad id", func() error { _, err := ss.Start("!current"); return err }, "kernel", CodeSessionInvalid},
		{"pointer is no session", func() error { _, err := ss.Load("!current"); return err }, "kernel", CodeSessionNotFound},
	}
	for _, s := range steps {
		err := s.do()
		if (s.code == "" && err != nil) || (s.code != "" && !uerr.HasCode(err, s.code)) {
			t.Fatalf("%s: %v", s.name, err)
		}
		if id, _ := ss.CurrentID(); id != s.current {
			t.Fatalf("%s: current %q, want %q", s.name, id, s.current)
		}
	}
	all, err := ss.List(true)
	if err != nil || len(all) != 3 {
		t.Fatalf("List = %+v, %v", all, err)
	}
	state := map[string]bool{}
	for _, s := range all {
		state[s.ID] = s.Archived()
	}
	if state["kernel"] || !state["s2"] || state["s3"] {
		t.Fatalf("archived: %v", state)
	}
	// The pointer survives a reopen and Current follows it.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = store.Open(context.Background(), store.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if cur, err := NewSessions(db, nil).Current("other"); err != nil || cur.ID != "kernel" {
		t.Fatalf("Current after reopen = %+v, %v", cur, err)
	}
}
