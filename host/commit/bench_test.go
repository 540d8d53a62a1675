package commit

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// benchRepo is a repository of n files in 100-file directories.
func benchRepo(b *testing.B, n int) string {
	project := newRepo(b)
	for i := 0; i < n; i++ {
		write(b, project, fmt.Sprintf("pkg%02d/f%04d.go", i/100, i), fmt.Sprintf("package pkg%02d\n\nvar V%d = %d\n", i/100, i, i))
	}
	gitc(b, project, "add", "-A")
	gitc(b, project, "commit", "-q", "-m", "tree")
	return project
}

func twoFiles(b *testing.B, project string, i int) Request {
	req := Request{Message: fmt.Sprintf("fluffy: change %d", i), AuthorName: "fluffy", AuthorEmail: "f@localhost"}
	for _, p := range []string{"pkg03/f0300.go", "pkg07/new.go"} {
		c := fmt.Sprintf("package x\n\nvar Rev = %d\n", i)
		write(b, project, p, c)
		req.Files = append(req.Files, File{Path: p, Content: []byte(c)})
	}
	return req
}

// BenchmarkApply: the kernel-side check and apply of a two-file commit in
// a 1 000-file repository (output prepared outside the timer).
func BenchmarkApply(b *testing.B) {
	project := benchRepo(b, 1000)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		req := twoFiles(b, project, i)
		out := b.TempDir()
		id := buildOutput(b, project, out, req, forge{})
		b.StartTimer()
		if _, err := Apply(ctx, project, filepath.Join(out, vcs.CommitDir, id), id, req); err != nil {
			b.Fatal(err)
		}
	}
}
