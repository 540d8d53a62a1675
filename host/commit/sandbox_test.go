package commit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/fluffy-waffle/fluffy/host/commit"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// TestCommitThroughSandboxedPlugin: the real vcs-git binary in a real L2
// container (through a real kernel: supervisor, runtime-docker adapter,
// session view as /workspace) builds the commit of a merge; host/commit
// checks and applies it; the git CLI sees the commit, and the user's own
// changes stay uncommitted.
func TestCommitThroughSandboxedPlugin(t *testing.T) {
	project := NewRepo(t)
	// The kernel keeps its database in the project; users ignore it.
	Write(t, project, ".git/info/exclude", ".fluffy/\n")
	UserChanges(t, project)
	head := Gitc(t, project, "rev-parse", "HEAD")
	e := kerneltest.Start(t, project, kerneltest.Options{}, "builtin-plugins/vcs-git")
	ctx := context.Background()

	// Read-only calls first: the plugin sees the repository through its view.
	var st vcs.Status
	var log []vcs.LogEntry
	var diff string
	if err := e.Kernel.Plugins.UseVCS(ctx, "vcs-git", func(ctx context.Context, c vcs.Client, _ string) error {
		var err error
		if st, err = c.Status(ctx); err != nil {
			return err
		}
		if log, err = c.Log(ctx, 5); err != nil {
			return err
		}
		diff, err = c.Diff(ctx, []string{"other.txt"}, false)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if st.Branch != "main" || st.Head != head {
		t.Fatalf("status in the sandbox: %+v", st)
	}
	if len(log) != 2 || log[0].Commit != head || log[1].Message != "first\n" {
		t.Fatalf("log in the sandbox: %+v", log)
	}
	if !strings.Contains(diff, "+other, edited by the user") {
		t.Fatalf("diff in the sandbox:\n%s", diff)
	}

	req := MergedRequest(t, project)
	res, err := Commit(ctx, e.Kernel.Plugins, "vcs-git", project, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped || res.Parent != head || res.Warning != "" || res.Objects == 0 {
		t.Fatalf("result %+v", res)
	}
	CheckLanded(t, project, res.Commit, head, "fluffy: change A", []string{"README", "src/a.go", "src/new/c.go"})
	if got := Gitc(t, project, "log", "-1", "--format=%an <%ae>|%B"); got != "fluffy <fluffy@localhost>|fluffy: change A\n\nSession s1." {
		t.Fatalf("author and message: %q", got)
	}

	// The plugin's status of the new state, after the view refresh.
	if err := e.Kernel.Plugins.UseVCS(ctx, "vcs-git", func(ctx context.Context, c vcs.Client, _ string) error {
		var err error
		st, err = c.Status(ctx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if st.Head != res.Commit {
		t.Fatalf("status after the commit: %+v", st)
	}

	// A second merge on top, then a commit the branch moved under: the
	// user commits by hand between the plugin's build and the apply.
	Write(t, project, "src/a.go", "package src\n\nfunc A() int { return 2 }\n")
	req2 := Request{Message: "fluffy: A returns 2", AuthorName: "fluffy", AuthorEmail: "fluffy@localhost",
		Files: []File{{Path: "src/a.go", Content: []byte("package src\n\nfunc A() int { return 2 }\n")}}}
	var id, out string
	if err := e.Kernel.Plugins.UseVCS(ctx, "vcs-git", func(ctx context.Context, c vcs.Client, o string) error {
		var err error
		id, err = c.Commit(ctx, vcs.CommitRequest{Message: req2.Message, Paths: []string{"src/a.go"}, AuthorName: "fluffy", AuthorEmail: "fluffy@localhost"})
		out = o
		return err
	}); err != nil {
		t.Fatal(err)
	}
	Gitc(t, project, "commit", "-q", "-m", "user commit meanwhile")
	moved := Gitc(t, project, "rev-parse", "HEAD")
	_, err = Apply(ctx, project, filepath.Join(out, vcs.CommitDir, id), id, req2)
	if ue, ok := uerr.As(err); !ok || ue.Code != CodeRefusedParent {
		t.Fatalf("a commit built on a stale HEAD: want %s, got %v", CodeRefusedParent, err)
	}
	if got := Gitc(t, project, "rev-parse", "HEAD"); got != moved {
		t.Fatalf("HEAD %s, want the user's %s", got, moved)
	}
	if _, err := os.Stat(filepath.Join(out, vcs.CommitDir, id)); err != nil {
		t.Fatalf("a refused output must be kept for inspection: %v", err)
	}
}

// TestCommitNotARepositoryThroughKernel: a project without .git merges
// fine and the commit is skipped with a clear reason, without starting
// the plugin.
func TestCommitNotARepositoryThroughKernel(t *testing.T) {
	project := t.TempDir()
	Write(t, project, "src/a.go", "package src\n")
	e := kerneltest.Start(t, project, kerneltest.Options{}, "builtin-plugins/vcs-git")
	res, err := Commit(context.Background(), e.Kernel.Plugins, "vcs-git", project,
		Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: "src/a.go", Content: []byte("package src\n")}}})
	if err != nil || !res.Skipped || res.Reason != NotRepoReason {
		t.Fatalf("%+v %v", res, err)
	}
	if st, _ := e.Kernel.Plugins.Stats("vcs-git"); st.Running {
		t.Fatal("the plugin was started for a project without a repository")
	}
}
