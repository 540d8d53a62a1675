package commit

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// git runs the real git CLI in dir with a fixed identity and no user or
// system configuration.
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

func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("the git CLI is not installed (.ci/run installs it)")
		}
		t.Skip("the git CLI is not installed")
	}
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

// newRepo makes a real repository with two commits on main:
// README, src/a.go, src/b.go, other.txt, staged.txt.
func newRepo(t testing.TB) string {
	t.Helper()
	needGit(t)
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	gitc(t, dir, "init", "-q", "-b", "main")
	write(t, dir, "README", "hello\n")
	write(t, dir, "src/a.go", "package src\n\nfunc A() {}\n")
	write(t, dir, "other.txt", "other\n")
	gitc(t, dir, "add", "-A")
	gitc(t, dir, "commit", "-q", "-m", "first")
	write(t, dir, "src/b.go", "package src\n\nfunc B() {}\n")
	write(t, dir, "staged.txt", "staged\n")
	gitc(t, dir, "add", "-A")
	gitc(t, dir, "commit", "-q", "-m", "second")
	return dir
}

// forge is a plugin output the test controls.
type forge struct {
	parents []plumbing.Hash
	tree    plumbing.Hash // zero: the expected tree
	message string        // "": the request's
	extra   []obj         // more objects to write
	skip    map[plumbing.Hash]bool
	summary *vcs.CommitOutput
}

// buildOutput writes a plugin-style output for req into out and returns
// the commit id: by default exactly what a correct plugin writes.
func buildOutput(t testing.TB, project, out string, req Request, f forge) string {
	t.Helper()
	st, err := open(project)
	if err != nil || st == nil {
		t.Fatalf("open: %v", err)
	}
	exp, err := st.expected(req)
	if err != nil {
		t.Fatal(err)
	}
	parents := f.parents
	if parents == nil && !st.head.IsZero() {
		parents = []plumbing.Hash{st.head}
	}
	tree := exp.root
	if !f.tree.IsZero() {
		tree = f.tree
	}
	msg := normMessage(req.Message)
	if f.message != "" {
		msg = f.message
	}
	sig := object.Signature{Name: req.AuthorName, Email: req.AuthorEmail, When: time.Unix(1700000000, 0).UTC()}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree, ParentHashes: parents}
	mo := &plumbing.MemoryObject{}
	if err := c.Encode(mo); err != nil {
		t.Fatal(err)
	}
	rd, _ := mo.Reader()
	data, _ := io.ReadAll(rd)
	id := hashOf(plumbing.CommitObject, data)
	dir := filepath.Join(out, vcs.CommitDir, id.String())
	objs := []obj{{plumbing.CommitObject, data}}
	for _, h := range exp.order {
		if st.r.Storer.HasEncodedObject(h) != nil && !f.skip[h] {
			objs = append(objs, exp.objs[h])
		}
	}
	objs = append(objs, f.extra...)
	for _, o := range objs {
		writeObj(t, dir, o)
	}
	sum := vcs.CommitOutput{Commit: id.String(), Branch: st.branch.String(), Paths: exp.paths}
	if !st.head.IsZero() {
		sum.Parent = st.head.String()
	}
	if f.summary != nil {
		sum = *f.summary
	}
	js, _ := json.Marshal(sum)
	if err := os.WriteFile(filepath.Join(dir, vcs.CommitFile), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func writeObj(t testing.TB, dir string, o obj) plumbing.Hash {
	t.Helper()
	h := hashOf(o.typ, o.data).String()
	p := filepath.Join(dir, "objects", h[:2], h[2:])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := objfile.NewWriter(f)
	w.WriteHeader(o.typ, int64(len(o.data)))
	w.Write(o.data)
	w.Close()
	f.Close()
	return plumbing.NewHash(h)
}
