package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/host/commit"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

func gitc(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_AUTHOR_NAME=User", "GIT_AUTHOR_EMAIL=user@example.com", "GIT_COMMITTER_NAME=User", "GIT_COMMITTER_EMAIL=user@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimRight(string(out), "\n")
}

func write(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture is a real repository with two commits, an unstaged change, a
// staged change and an untracked file.
func fixture(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the git CLI is not installed (.ci/run installs it)")
		}
		t.Skip("the git CLI is not installed")
	}
	dir := t.TempDir()
	gitc(t, dir, "init", "-q", "-b", "main")
	write(t, dir, "README", "hello\n")
	write(t, dir, "src/a.go", "package src\n\nfunc A() {}\n")
	write(t, dir, "run.sh", "#!/bin/sh\n")
	os.Chmod(filepath.Join(dir, "run.sh"), 0o755)
	gitc(t, dir, "add", "-A")
	gitc(t, dir, "commit", "-q", "-m", "first")
	write(t, dir, "staged.txt", "one\n")
	gitc(t, dir, "add", "-A")
	gitc(t, dir, "commit", "-q", "-m", "second")
	write(t, dir, "README", "hello\nworld\n")
	write(t, dir, "staged.txt", "two\n")
	gitc(t, dir, "add", "staged.txt")
	write(t, dir, "new.txt", "untracked\n")
	return dir
}

// client serves the plugin over in-memory gRPC with API version v.
func client(t testing.TB, v int, ws, out string) vcs.Client {
	t.Helper()
	set := vcs.PluginSets(newGitVCS(hclog.NewNullLogger()), []int{v})[v]
	c, _ := plugin.TestPluginGRPCConn(t, false, set)
	t.Cleanup(func() { c.Close() })
	raw, err := c.Dispense(vcs.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	vc := raw.(vcs.Client)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := vc.Configure(ctx, base.Config{Workspace: ws, OutDir: out, SessionID: "s", InstanceID: "i"}, nil); err != nil {
		t.Fatal(err)
	}
	return vc
}

// treeSum hashes every file under dir (names, modes, contents).
func treeSum(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	var names []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			names = append(names, p)
		}
		return nil
	})
	sort.Strings(names)
	for _, p := range names {
		fi, _ := os.Lstat(p)
		h.Write([]byte(p + fi.Mode().String()))
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestStatusDiffLog(t *testing.T) {
	ws := fixture(t)
	for _, v := range []int{1, 2} {
		c := client(t, v, ws, t.TempDir())
		ctx := context.Background()
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, f := range st.Files {
			got[f.Path] = f.Status
		}
		want := map[string]string{"README": " M", "staged.txt": "M ", "new.txt": "??"}
		if len(got) != len(want) || got["README"] != want["README"] || got["staged.txt"] != want["staged.txt"] || got["new.txt"] != want["new.txt"] {
			t.Fatalf("v%d status %v, want %v (git: %q)", v, got, want, gitc(t, ws, "status", "--porcelain"))
		}
		if st.Branch != "main" || st.Head != gitc(t, ws, "rev-parse", "HEAD") {
			t.Fatalf("v%d status head %+v", v, st)
		}
		d, err := c.Diff(ctx, nil, false)
		if err != nil || !strings.Contains(d, "--- a/README") || !strings.Contains(d, "+world") || strings.Contains(d, "staged.txt") {
			t.Fatalf("v%d diff (%v):\n%s", v, err, d)
		}
		d, err = c.Diff(ctx, []string{"staged.txt"}, true)
		if err != nil || !strings.Contains(d, "-one") || !strings.Contains(d, "+two") || strings.Contains(d, "README") {
			t.Fatalf("v%d staged diff (%v):\n%s", v, err, d)
		}
		if _, err := c.Diff(ctx, []string{"../etc"}, false); !uerr.HasPluginCode(err, CodeBadPath) {
			t.Fatalf("v%d diff escape: %v", v, err)
		}
		log, err := c.Log(ctx, 1)
		if err != nil || len(log) != 1 || log[0].Message != "second\n" || log[0].Author != "User <user@example.com>" {
			t.Fatalf("v%d log %+v %v", v, log, err)
		}
		if log, _ := c.Log(ctx, 0); len(log) != 2 {
			t.Fatalf("v%d full log %d entries", v, len(log))
		}
	}
}

// TestCommitWritesOnlyOutput: the commit lands in /out, not in .git, and
// host/commit accepts and applies exactly that output.
func TestCommitWritesOnlyOutput(t *testing.T) {
	ws := fixture(t)
	out := t.TempDir()
	c := client(t, 2, ws, out)
	head := gitc(t, ws, "rev-parse", "HEAD")
	write(t, ws, "src/a.go", "package src\n\nfunc A() int { return 1 }\n")
	write(t, ws, "tools/gen.sh", "#!/bin/sh\necho gen\n")
	os.Chmod(filepath.Join(ws, "tools/gen.sh"), 0o755)
	os.Remove(filepath.Join(ws, "run.sh"))
	before := treeSum(t, filepath.Join(ws, ".git"))
	id, err := c.Commit(context.Background(), vcs.CommitRequest{Message: "fluffy: merge", Paths: []string{"src/a.go", "tools/gen.sh", "run.sh"}, AuthorName: "fluffy", AuthorEmail: "f@localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if treeSum(t, filepath.Join(ws, ".git")) != before {
		t.Fatal("the plugin wrote the repository")
	}
	dir := filepath.Join(out, vcs.CommitDir, id)
	var sum vcs.CommitOutput
	b, err := os.ReadFile(filepath.Join(dir, vcs.CommitFile))
	if err != nil || json.Unmarshal(b, &sum) != nil {
		t.Fatalf("summary: %v %s", err, b)
	}
	if sum.Commit != id || sum.Parent != head || sum.Branch != "refs/heads/main" || strings.Join(sum.Paths, ",") != "run.sh,src/a.go,tools/gen.sh" {
		t.Fatalf("summary %+v", sum)
	}
	// commit + 2 blobs + root, src and tools trees.
	if n := countFiles(t, filepath.Join(dir, "objects")); n != 6 {
		t.Fatalf("%d objects in the output, want 6", n)
	}
	req := commit.Request{Message: "fluffy: merge", AuthorName: "fluffy", AuthorEmail: "f@localhost", Files: []commit.File{
		{Path: "src/a.go", Content: []byte("package src\n\nfunc A() int { return 1 }\n")},
		{Path: "tools/gen.sh", Content: []byte("#!/bin/sh\necho gen\n")},
		{Path: "run.sh", Delete: true},
	}}
	res, err := commit.Apply(context.Background(), ws, dir, id, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != id || gitc(t, ws, "rev-parse", "HEAD") != id {
		t.Fatalf("%+v", res)
	}
	if got := gitc(t, ws, "ls-tree", "-r", "HEAD", "tools/gen.sh"); !strings.HasPrefix(got, "100755 blob") {
		t.Fatalf("new executable committed as %q", got)
	}
	if got := gitc(t, ws, "status", "--porcelain"); got != " M README\nM  staged.txt\n?? new.txt" {
		t.Fatalf("status after the commit:\n%s", got)
	}
}

func countFiles(t testing.TB, dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// TestWithoutGitConfig: the session view hides .git/config (it can hold
// credentials); everything still works.
func TestWithoutGitConfig(t *testing.T) {
	ws := fixture(t)
	os.Remove(filepath.Join(ws, ".git", "config"))
	c := client(t, 1, ws, t.TempDir())
	ctx := context.Background()
	if st, err := c.Status(ctx); err != nil || st.Branch != "main" {
		t.Fatalf("status %+v %v", st, err)
	}
	if _, err := c.Commit(ctx, vcs.CommitRequest{Message: "m", Paths: []string{"README"}, AuthorName: "a", AuthorEmail: "a@b"}); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	notRepo := t.TempDir()
	c := client(t, 2, notRepo, t.TempDir())
	if _, err := c.Status(ctx); !uerr.HasPluginCode(err, CodeNotRepo) {
		t.Fatalf("not a repo: %v", err)
	}
	ws := fixture(t)
	c = client(t, 2, ws, t.TempDir())
	for _, tc := range []struct {
		name string
		req  vcs.CommitRequest
		code string
	}{
		{"empty-message", vcs.CommitRequest{Message: "  ", Paths: []string{"README"}, AuthorName: "a", AuthorEmail: "a@b"}, CodeBadRequest},
		{"no-paths", vcs.CommitRequest{Message: "m", AuthorName: "a", AuthorEmail: "a@b"}, CodeNoPaths},
		{"git-dir", vcs.CommitRequest{Message: "m", Paths: []string{".git/config"}, AuthorName: "a", AuthorEmail: "a@b"}, CodeBadPath},
		{"escape", vcs.CommitRequest{Message: "m", Paths: []string{"../x"}, AuthorName: "a", AuthorEmail: "a@b"}, CodeBadPath},
		{"author-injection", vcs.CommitRequest{Message: "m", Paths: []string{"README"}, AuthorName: "a>\nparent x", AuthorEmail: "a@b"}, CodeBadRequest},
		{"through-file", vcs.CommitRequest{Message: "m", Paths: []string{"README/x"}, AuthorName: "a", AuthorEmail: "a@b"}, CodeBadPath},
	} {
		if _, err := c.Commit(ctx, tc.req); !uerr.HasPluginCode(err, tc.code) {
			t.Errorf("%s: want %s, got %v", tc.name, tc.code, err)
		}
	}
	gitc(t, ws, "checkout", "-q", "--detach")
	if _, err := c.Commit(ctx, vcs.CommitRequest{Message: "m", Paths: []string{"README"}, AuthorName: "a", AuthorEmail: "a@b"}); !uerr.HasPluginCode(err, CodeDetached) {
		t.Fatalf("detached: %v", err)
	}
}

// TestConformance runs the vcs profile (what `fluffy plugin install` runs)
// on the built binary: VCS-COMMIT-001 applies its output with host/commit.
func TestConformance(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the git CLI is not installed (.ci/run installs it)")
		}
		t.Skip("the git CLI is not installed")
	}
	rep := kerneltest.Conformance(t, "builtin-plugins/vcs-git")
	if !rep.Passed() {
		t.Errorf("not certified: %s", rep.Summary())
	}
	for _, r := range rep.Results {
		if strings.HasPrefix(r.ID, "VCS-") && r.Status != conformance.Pass {
			t.Errorf("%s: %s %s", r.ID, r.Status, r.Message)
		}
	}
}
