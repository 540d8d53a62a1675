package audit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// tree lists every file under dir (and quarantine siblings) with size and
// mtime, to prove a read-only open changed nothing.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	roots, _ := filepath.Glob(dir + "*")
	for _, root := range roots {
		_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil {
				lines = append(lines, fmt.Sprintf("%s %d %d", p, fi.Size(), fi.ModTime().UnixNano()))
			}
			return nil
		})
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// A read-only log reports what it finds and writes nothing: not the
// chain-break record a writable open adds, not a recovery of a damaged
// database, not an append or a retention pass.
func TestReadOnlyOpenWritesNothing(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		code    string // Open's error code; "" means Open succeeds
		breakAt uint64 // the startup report's first break
	}{
		{"clean", func(*testing.T, string) {}, "", 0},
		{"record deleted", func(t *testing.T, dir string) {
			withBadger(t, dir, func(txn *badger.Txn) error { return txn.Delete(recKey(7)) })
		}, "", 7},
		{"table truncated", func(t *testing.T, dir string) {
			ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			sort.Strings(ssts)
			fi, _ := os.Stat(ssts[len(ssts)-1])
			must(t, os.Truncate(ssts[len(ssts)-1], fi.Size()/3))
		}, store.CodeCorrupt, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := dbDir(t)
			for i := 0; i < 2; i++ {
				l := openLog(t, dir, nil)
				appendN(t, l, 20, EventToolExecute)
				must(t, l.Close())
			}
			c.damage(t, dir)
			before := tree(t, dir)
			l, err := Open(ctx, Options{Dir: dir, ReadOnly: true})
			if c.code != "" {
				if !uerr.HasCode(err, c.code) {
					t.Fatalf("Open: %v, want %s", err, c.code)
				}
			} else {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if got := l.StartupReport().FirstBad(); got != c.breakAt {
					t.Fatalf("startup report first break %d, want %d", got, c.breakAt)
				}
				if _, err := l.Append(ctx, Event{Type: EventKernelStart}); !uerr.HasCode(err, CodeReadOnly) {
					t.Fatalf("Append: %v, want %s", err, CodeReadOnly)
				}
				if _, err := l.ApplyRetention(ctx); !uerr.HasCode(err, CodeReadOnly) {
					t.Fatalf("ApplyRetention: %v, want %s", err, CodeReadOnly)
				}
				if _, err := l.Query(ctx, Filter{}); err != nil {
					t.Fatalf("Query: %v", err)
				}
				must(t, l.Close())
			}
			if after := tree(t, dir); after != before {
				t.Fatalf("a read-only open changed files:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}
