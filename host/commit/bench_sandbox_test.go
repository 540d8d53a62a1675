package commit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/fluffy-waffle/fluffy/host/commit"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
)

func benchRepoExt(b *testing.B, n int) string {
	project := NewRepo(b)
	for i := 0; i < n; i++ {
		Write(b, project, fmt.Sprintf("pkg%02d/f%04d.go", i/100, i), fmt.Sprintf("package pkg%02d\n\nvar V%d = %d\n", i/100, i, i))
	}
	Gitc(b, project, "add", "-A")
	Gitc(b, project, "commit", "-q", "-m", "tree")
	return project
}

func twoFilesExt(b *testing.B, project string, i int) Request {
	req := Request{Message: fmt.Sprintf("fluffy: change %d", i), AuthorName: "fluffy", AuthorEmail: "f@localhost"}
	for _, p := range []string{"pkg03/f0300.go", "pkg07/new.go"} {
		c := fmt.Sprintf("package x\n\nvar Rev = %d\n", i)
		Write(b, project, p, c)
		req.Files = append(req.Files, File{Path: p, Content: []byte(c)})
	}
	return req
}

// BenchmarkCommitSandboxed: the whole commit of a merge of two files in a
// 1 000-file repository — the vcs-git plugin, warm in its L2 container,
// builds it (with the view refresh before the call), the kernel checks and
// applies it.
func BenchmarkCommitSandboxed(b *testing.B) {
	project := benchRepoExt(b, 1000)
	Write(b, project, ".git/info/exclude", ".fluffy/\n")
	e := kerneltest.Start(b, project, kerneltest.Options{}, "builtin-plugins/vcs-git")
	ctx := context.Background()
	if _, err := Commit(ctx, e.Kernel.Plugins, "vcs-git", project, twoFilesExt(b, project, -1)); err != nil {
		b.Fatal(err) // warm: the container starts here
	}
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		req := twoFilesExt(b, project, i)
		b.StartTimer()
		t0 := time.Now()
		if _, err := Commit(ctx, e.Kernel.Plugins, "vcs-git", project, req); err != nil {
			b.Fatal(err)
		}
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/commit")
}
