package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// session writes keys [from, from+n) and closes, which flushes them into a
// table of their own.
func session(t *testing.T, dir string, from, n int) {
	t.Helper()
	db, err := Open(context.Background(), Options{Dir: dir, NoRecover: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		for i := from; i < from+n; i++ {
			if err := txn.Set(key(i), []byte(strings.Repeat("v", 100)+fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func key(i int) []byte { return []byte(fmt.Sprintf("t/%06d", i)) }

func present(t *testing.T, db *DB, from, n int) int {
	t.Helper()
	got := 0
	_ = db.View(func(txn *badger.Txn) error {
		for i := from; i < from+n; i++ {
			if _, err := txn.Get(key(i)); err == nil {
				got++
			}
		}
		return nil
	})
	return got
}

func files(t *testing.T, dir, ext string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, "*."+ext))
	sort.Strings(m)
	return m
}

func TestOpenCleanAndLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".fluffy", "db")
	session(t, dir, 0, 10)
	db, err := Open(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Recovery() != nil {
		t.Fatalf("clean database reported recovery: %+v", db.Recovery())
	}
	if n := present(t, db, 0, 10); n != 10 {
		t.Fatalf("%d of 10 keys after reopen", n)
	}
	_, err = Open(context.Background(), Options{Dir: dir})
	if !uerr.HasCode(err, CodeLocked) {
		t.Fatalf("second Open: %v, want %s", err, CodeLocked)
	}
	if _, err := Open(context.Background(), Options{}); !uerr.HasCode(err, CodeOpen) {
		t.Fatalf("Open without dir: %v", err)
	}
}

// TestDamagedFiles damages real badger files and checks that Open reports
// it clearly (NoRecover), and otherwise recovers: the damaged files are
// moved aside, everything readable is kept, and the database works.
func TestDamagedFiles(t *testing.T) {
	cases := []struct {
		name string
		// damage returns the file it damaged.
		damage func(t *testing.T, dir string) string
		// keep is how many of the 300 keys (100 per table) must survive.
		keep     int
		corrupts bool
	}{
		{"truncate newest table", func(t *testing.T, dir string) string {
			s := files(t, dir, "sst")
			f := s[len(s)-1]
			fi, _ := os.Stat(f)
			must(t, os.Truncate(f, fi.Size()/2))
			return f
		}, 200, true},
		{"truncate oldest table to zero", func(t *testing.T, dir string) string {
			f := files(t, dir, "sst")[0]
			must(t, os.Truncate(f, 0))
			return f
		}, 200, true},
		{"flip bytes in a table", func(t *testing.T, dir string) string {
			f := files(t, dir, "sst")[1]
			b, _ := os.ReadFile(f)
			for i := 100; i < 200; i++ {
				b[i] ^= 0xff
			}
			must(t, os.WriteFile(f, b, 0o600))
			return f
		}, 200, true},
		{"delete a table", func(t *testing.T, dir string) string {
			f := files(t, dir, "sst")[1]
			must(t, os.Remove(f))
			return f
		}, 200, true},
		{"garbage MANIFEST", func(t *testing.T, dir string) string {
			f := filepath.Join(dir, "MANIFEST")
			must(t, os.WriteFile(f, []byte("not a manifest"), 0o600))
			return f
		}, 300, true},
		{"truncate value log", func(t *testing.T, dir string) string {
			s := files(t, dir, "vlog")
			f := s[len(s)-1]
			must(t, os.Truncate(f, 3))
			return f
		}, 300, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			session(t, dir, 0, 100)
			session(t, dir, 100, 100)
			session(t, dir, 200, 100)
			if n := len(files(t, dir, "sst")); n != 3 {
				t.Fatalf("setup: %d tables, want 3", n)
			}
			bad := c.damage(t, dir)

			db0, err := Open(context.Background(), Options{Dir: dir, NoRecover: true})
			if c.corrupts {
				if !uerr.HasCode(err, CodeCorrupt) {
					t.Fatalf("NoRecover Open: %v, want %s", err, CodeCorrupt)
				}
				if !strings.Contains(err.Error(), filepath.Base(bad)) && !strings.Contains(err.Error(), "MANIFEST") {
					t.Errorf("error does not name the damaged file %s: %v", filepath.Base(bad), err)
				}
			} else if err != nil {
				t.Fatalf("Open after %s: %v", c.name, err)
			} else {
				// badger repairs a truncated value log itself
				must(t, db0.Close())
			}

			db, err := Open(context.Background(), Options{Dir: dir})
			if err != nil {
				t.Fatalf("recovering Open: %v", err)
			}
			defer db.Close()
			rec := db.Recovery()
			if c.corrupts {
				if rec == nil {
					t.Fatal("damage not reported through Recovery()")
				}
				if !uerr.HasCode(rec.Cause, CodeCorrupt) {
					t.Errorf("Recovery.Cause = %v", rec.Cause)
				}
				if _, err := os.Stat(rec.Quarantine); err != nil {
					t.Errorf("quarantine %s missing: %v", rec.Quarantine, err)
				}
			}
			if n := present(t, db, 0, 300); n < c.keep {
				t.Fatalf("%d of 300 keys kept, want at least %d", n, c.keep)
			}
			// The database is usable.
			if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("after"), []byte("x")) }); err != nil {
				t.Fatalf("write after recovery: %v", err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}
