package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// BenchmarkSearcher10k is the search itself, in process, without any
// plugin or sandbox boundary: the floor the sandboxed figure is read
// against.
func BenchmarkSearcher10k(b *testing.B) {
	ws := b.TempDir()
	makeTree(b, filepath.Join(ws, "src"), 10000)
	re := regexp.MustCompile("(?m)NEEDLE")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := &searcher{re: re, limit: 2000}
		w := &walker{root: ws, ctx: context.Background()}
		if err := w.walk("src", func(dirfd int, name, rel string, _ bool) error {
			s.file(dirfd, name, rel)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if len(s.res.Matches) != 200 {
			b.Fatalf("%d matches", len(s.res.Matches))
		}
	}
	_ = os.Stdout
}
