package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/policy"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, root, rel, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), mode))
	must(t, os.Chmod(p, mode))
}

func defaultEngine(t testing.TB) *policy.Engine {
	t.Helper()
	p, err := policy.Default()
	must(t, err)
	return policy.NewEngine(p, policy.Options{})
}

func engineFor(t *testing.T, yaml string) *policy.Engine {
	t.Helper()
	p, err := policy.Load("test.yaml", []byte(yaml))
	must(t, err)
	return policy.NewEngine(p, policy.Options{})
}

// later is a clock an hour ahead: nothing the test wrote counts as racily
// recent, so a refresh with no change really scans nothing.
func later() time.Time { return time.Now().Add(time.Hour) }

func toolFS() Reader {
	return Reader{Caller: policy.Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool", Tags: []string{"core_plugin"}}}
}

func openSession(t *testing.T, project string, j Judge, reader Identity) *Session {
	t.Helper()
	s, err := Open(context.Background(), "s1", Options{Home: t.TempDir(), Project: project, Judge: j, Reader: reader, Now: later})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// listing returns every entry of dir (relative, "/" after directories,
// "-> target" after symlinks), sorted.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		must(t, err)
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			rel += "/"
		case d.Type()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			rel += " -> " + target
		}
		out = append(out, rel)
		return nil
	})
	sort.Strings(out)
	return out
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	must(t, err)
	fb, err := os.Stat(b)
	must(t, err)
	return os.SameFile(fa, fb)
}

// TestViewHidesWhatThePolicyDenies: the view holds the
// project minus every path the policy denies the plugin to read, never
// .fluffy/, and links are judged by their resolved target.
func TestViewHidesWhatThePolicyDenies(t *testing.T) {
	base := t.TempDir()
	proj := filepath.Join(base, "proj")
	write(t, proj, "src/a.go", "package a\n", 0o644)
	write(t, proj, "README.md", "hello\n", 0o644)
	write(t, proj, ".env", "API_KEY=secret\n", 0o644)
	write(t, proj, ".env.example", "API_KEY=\n", 0o644)
	write(t, proj, "certs/server.pem", "-----BEGIN-----\n", 0o644)
	write(t, proj, ".git/config", "[remote \"origin\"]\n\turl = https://user:token@example.com/r.git\n", 0o644)
	write(t, proj, ".git/HEAD", "ref: refs/heads/main\n", 0o644)
	write(t, proj, ".fluffy/db/000001.vlog", "audit bytes", 0o600)
	write(t, proj, ".fluffy/policy.yaml", "version: 1\n", 0o644)
	write(t, proj, "secrets/prod.txt", "x\n", 0o644)
	write(t, base, "outside.txt", "host file\n", 0o644)
	must(t, os.Symlink("../.env", filepath.Join(proj, "docs-notes.txt")))
	must(t, os.MkdirAll(filepath.Join(proj, "docs"), 0o755))
	must(t, os.Symlink("../.env", filepath.Join(proj, "docs", "notes.txt")))
	must(t, os.Symlink("../src/a.go", filepath.Join(proj, "docs", "a-link.go")))
	must(t, os.Symlink("../src", filepath.Join(proj, "docs", "srcdir")))
	must(t, os.Symlink("../../outside.txt", filepath.Join(proj, "docs", "escape")))
	must(t, os.Symlink(filepath.Join(base, "outside.txt"), filepath.Join(proj, "docs", "abs")))
	must(t, os.Symlink("../secrets/prod.txt", filepath.Join(proj, "docs", "secret-link")))
	must(t, syscall.Mkfifo(filepath.Join(proj, "fifo"), 0o644))

	s := openSession(t, proj, defaultEngine(t), Identity{UID: os.Getuid(), GID: os.Getgid()})
	v, err := s.Prepare(context.Background(), toolFS())
	must(t, err)
	got := strings.Join(listing(t, v.Dir), "\n")
	want := strings.Join([]string{
		".env.example",
		".git/",
		".git/HEAD",
		"README.md",
		"certs/", // the directory is readable; server.pem in it is not
		"docs/",
		"docs/a-link.go -> ../src/a.go",
		"docs/srcdir -> ../src",
		"src/",
		"src/a.go",
	}, "\n")
	if got != want {
		t.Fatalf("view:\n%s\nwant:\n%s", got, want)
	}
	if !sameFile(t, filepath.Join(v.Dir, "src/a.go"), filepath.Join(proj, "src/a.go")) {
		t.Fatal("an unchanged readable file must be a hard link, not a copy")
	}
}

// TestViewRefreshIsIncremental: only what changed is touched; edits in
// place are seen through the shared inode, replacement by rename (what
// editors do) is noticed and relinked, deletions and new directories
// arrive, and a refresh without changes scans no directory.
func TestViewRefreshIsIncremental(t *testing.T) {
	proj := t.TempDir()
	for i := 0; i < 20; i++ {
		write(t, proj, filepath.Join("pkg", "sub", string(rune('a'+i))+".go"), "package sub\n", 0o644)
	}
	write(t, proj, "main.go", "package main\n", 0o644)
	s := openSession(t, proj, defaultEngine(t), Identity{UID: os.Getuid(), GID: os.Getgid()})
	ctx := context.Background()
	v, err := s.Prepare(ctx, toolFS())
	must(t, err)
	if v.Stats.Linked != 21 {
		t.Fatalf("first build linked %d files: %+v", v.Stats.Linked, v.Stats)
	}
	v, err = s.Prepare(ctx, toolFS())
	must(t, err)
	if v.Stats.DirsScanned != 0 || v.Stats.Linked != 0 || v.Stats.DirsChecked != 3 {
		t.Fatalf("an unchanged project must not be rescanned: %+v", v.Stats)
	}

	// In place: the view shares the inode, nothing to do.
	must(t, os.WriteFile(filepath.Join(proj, "main.go"), []byte("package main // edited\n"), 0o644))
	if b, _ := os.ReadFile(filepath.Join(v.Dir, "main.go")); string(b) != "package main // edited\n" {
		t.Fatalf("in-place edit not visible: %q", b)
	}
	// Replace by rename: a new inode the view must pick up.
	tmp := filepath.Join(proj, "pkg", "sub", ".a.go.swp")
	must(t, os.WriteFile(tmp, []byte("package sub // saved by an editor\n"), 0o644))
	must(t, os.Rename(tmp, filepath.Join(proj, "pkg", "sub", "a.go")))
	// Delete one file, add a directory with a file.
	must(t, os.Remove(filepath.Join(proj, "pkg", "sub", "b.go")))
	write(t, proj, "newdir/deep/x.go", "package deep\n", 0o644)
	v, err = s.Prepare(ctx, toolFS())
	must(t, err)
	if b, _ := os.ReadFile(filepath.Join(v.Dir, "pkg/sub/a.go")); string(b) != "package sub // saved by an editor\n" {
		t.Fatalf("renamed-over file is stale in the view: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(v.Dir, "pkg/sub/b.go")); !os.IsNotExist(err) {
		t.Fatalf("deleted file still in view: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(v.Dir, "newdir/deep/x.go")); string(b) != "package deep\n" {
		t.Fatalf("new directory missing: %q", b)
	}
	if v.Stats.Linked != 2 || v.Stats.Removed != 1 {
		t.Fatalf("expected 2 links and 1 removal: %+v", v.Stats)
	}
	// Removing a whole directory from the project removes it from the view.
	must(t, os.RemoveAll(filepath.Join(proj, "newdir")))
	v, err = s.Prepare(ctx, toolFS())
	must(t, err)
	if _, err := os.Lstat(filepath.Join(v.Dir, "newdir")); !os.IsNotExist(err) {
		t.Fatalf("removed directory still in view: %v", err)
	}
}

// TestViewCopiesWhatTheSandboxCannotRead: a file the sandbox uid could not
// read through its mode (the user's 0600 file, a kernel running as root)
// is copied with a readable mode instead of linked (a link would share the
// 0600 mode), and an in-place edit of it is noticed by its stat.
func TestViewCopiesWhatTheSandboxCannotRead(t *testing.T) {
	proj := t.TempDir()
	write(t, proj, "private.go", "package p\n", 0o600)
	write(t, proj, "tool.sh", "#!/bin/sh\n", 0o700)
	write(t, proj, "public.go", "package p\n", 0o644)
	sandboxUser := Identity{UID: 65532, GID: 65532}
	if os.Getuid() == 65532 {
		t.Skip("test needs a uid other than the sandbox's")
	}
	s := openSession(t, proj, defaultEngine(t), sandboxUser)
	ctx := context.Background()
	v, err := s.Prepare(ctx, toolFS())
	must(t, err)
	if v.Stats.Copied != 2 || v.Stats.Linked != 1 {
		t.Fatalf("want 2 copies and 1 link: %+v", v.Stats)
	}
	for name, mode := range map[string]os.FileMode{"private.go": 0o644, "tool.sh": 0o755} {
		fi, err := os.Stat(filepath.Join(v.Dir, name))
		must(t, err)
		if fi.Mode().Perm() != mode {
			t.Errorf("%s in view has mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
		if sameFile(t, filepath.Join(v.Dir, name), filepath.Join(proj, name)) {
			t.Errorf("%s must be a copy", name)
		}
	}
	if fi, _ := os.Stat(filepath.Join(proj, "private.go")); fi.Mode().Perm() != 0o600 {
		t.Fatal("the project file's mode changed")
	}
	// Same size, new content, in place: the stat (mtime/ctime) differs.
	time.Sleep(10 * time.Millisecond)
	must(t, os.WriteFile(filepath.Join(proj, "private.go"), []byte("package q\n"), 0o600))
	v, err = s.Prepare(ctx, toolFS())
	must(t, err)
	if b, _ := os.ReadFile(filepath.Join(v.Dir, "private.go")); string(b) != "package q\n" {
		t.Fatalf("copy not refreshed: %q (%+v)", b, v.Stats)
	}
}

// TestViewFollowsPolicyChanges: a policy reload that denies more removes
// paths from the view at the next refresh, and a different plugin with a
// different policy answer gets a different view.
func TestViewFollowsPolicyChanges(t *testing.T) {
	proj := t.TempDir()
	write(t, proj, "src/a.go", "package a\n", 0o644)
	write(t, proj, "vendor/lib/b.go", "package lib\n", 0o644)
	e := engineFor(t, `
capabilities:
  - { name: read, match: { syscall: fs.read, path_glob: ["**"] }, action: allow }
  - { name: no-vendor-for-third-party, match: { syscall: fs.read, path_glob: ["vendor/"], caller_tag: third_party }, action: deny, reason: "vendored code is licensed" }
`)
	s := openSession(t, proj, e, Identity{UID: os.Getuid(), GID: os.Getgid()})
	ctx := context.Background()
	core, err := s.Prepare(ctx, toolFS())
	must(t, err)
	third := Reader{Caller: policy.Caller{Kind: "plugin", Plugin: "wordcount", PluginKind: "tool", Tags: []string{"third_party"}}}
	tv, err := s.Prepare(ctx, third)
	must(t, err)
	if _, err := os.Stat(filepath.Join(core.Dir, "vendor/lib/b.go")); err != nil {
		t.Fatalf("core plugin should see vendor/: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(tv.Dir, "vendor")); !os.IsNotExist(err) {
		t.Fatalf("third-party plugin must not see vendor/: %v", err)
	}
	p2, err := policy.Load("test2.yaml", []byte(`
capabilities:
  - { name: read, match: { syscall: fs.read, path_glob: ["**"] }, action: allow }
  - { name: no-src, match: { syscall: fs.read, path_glob: ["src/"] }, action: deny, reason: "not today" }
`))
	must(t, err)
	e.Swap(p2)
	core, err = s.Prepare(ctx, toolFS())
	must(t, err)
	if _, err := os.Lstat(filepath.Join(core.Dir, "src")); !os.IsNotExist(err) {
		t.Fatalf("src/ still visible after the policy denied it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(core.Dir, "vendor/lib/b.go")); err != nil {
		t.Fatalf("vendor/ lost: %v", err)
	}
}

// slowJudge is the real engine whose Policy() — read once at the start
// of every view refresh — takes a while and is counted, so refreshes
// overlap and can be told apart.
type slowJudge struct {
	*policy.Engine
	mu      sync.Mutex
	n       int
	started chan struct{}
}

func (j *slowJudge) Policy() *policy.Policy {
	j.mu.Lock()
	j.n++
	n := j.n
	j.mu.Unlock()
	if n == 2 { // the first measured refresh (the first one creates the view)
		close(j.started)
	}
	time.Sleep(100 * time.Millisecond)
	return j.Engine.Policy()
}

// TestConcurrentRefreshesAreShared: ten parallel calls to one plugin do
// not refresh its view ten times in a row. Callers that arrive while a
// refresh runs share one next refresh (not the running one, which may
// have read the changeset before their call).
func TestConcurrentRefreshesAreShared(t *testing.T) {
	project := t.TempDir()
	write(t, project, "src/a.go", "package a\n", 0o644)
	j := &slowJudge{Engine: defaultEngine(t), started: make(chan struct{})}
	s := openSession(t, project, j, Identity{UID: os.Getuid(), GID: os.Getgid()})
	_, err := s.Prepare(context.Background(), toolFS()) // creates the view
	must(t, err)
	first := make(chan error, 1)
	go func() {
		_, err := s.Prepare(context.Background(), toolFS())
		first <- err
	}()
	<-j.started // the first refresh runs now
	var wg sync.WaitGroup
	errs := make(chan error, 9)
	for range 9 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Prepare(context.Background(), toolFS())
			if err == nil && !strings.HasSuffix(v.Dir, "tool-fs") {
				err = fmt.Errorf("view dir %s", v.Dir)
			}
			errs <- err
		}()
	}
	wg.Wait()
	must(t, <-first)
	close(errs)
	for err := range errs {
		must(t, err)
	}
	if j.n != 3 {
		t.Fatalf("refreshes = %d, want 3 (the first, the running one, one shared by the nine that arrived during it)", j.n)
	}
}
