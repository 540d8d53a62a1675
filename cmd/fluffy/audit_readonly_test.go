package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
)

// dbListing lists every file of a database directory and its siblings (the
// lock file, any quarantine) with size, mode and mtime.
func dbListing(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	roots, _ := filepath.Glob(dir + "*")
	for _, root := range roots {
		_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err == nil {
				lines = append(lines, fmt.Sprintf("%s %d %v %d", p, fi.Size(), fi.Mode(), fi.ModTime().UnixNano()))
			}
			return nil
		})
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func chmodTree(t *testing.T, root string, f func(os.FileMode, bool) os.FileMode) {
	t.Helper()
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chmod(p, f(fi.Mode().Perm(), fi.IsDir()))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The read-only commands run on a database directory made read-only
// (chmod -R a-w) succeed and leave every file as it was.
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	project := seedProject(t)
	dir := store.DefaultDir(project)
	chmodTree(t, dir, func(m os.FileMode, _ bool) os.FileMode { return m &^ 0o222 })
	t.Cleanup(func() { chmodTree(t, dir, func(m os.FileMode, _ bool) os.FileMode { return m | 0o200 }) })
	before := dbListing(t, dir)
	home := t.TempDir()
	cases := [][]string{
		{"audit", "log", "--project", project},
		{"audit", "verify", "--project", project},
		{"audit", "verify", "--all", "--project", project},
		{"audit", "export", "--project", project},
		{"audit", "stats", "--project", project},
		{"policy", "show", "--project", project},
	}
	for _, args := range cases {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			e, out, errb := auditTestEnv()
			e.home = home
			if code := run(args, e); code != 0 {
				t.Fatalf("%v: exit %d\n%s%s", args, code, out, errb)
			}
			if after := dbListing(t, dir); after != before {
				t.Fatalf("%v changed the database:\nbefore:\n%s\nafter:\n%s", args, before, after)
			}
		})
	}
}

// Run as another user, an audit command reads a database it may read, and
// on one it may not it says so (STORE_PERMISSION): never STORE_CORRUPT, and
// nothing is moved.
func TestAuditAsAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root: this test must run there")
		}
		t.Skip("needs root to run a command as user nobody")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) is needed to run as another user")
	}
	base, err := os.MkdirTemp("", "fluffy-other-user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(base, 0o755))
	bin := filepath.Join(base, "fluffy")
	copyExec(t, testbin.Build(t, "cmd/fluffy"), bin)
	home := filepath.Join(base, "home")
	must(os.Mkdir(home, 0o777))
	must(os.Chmod(home, 0o777))

	cases := []struct {
		name  string
		perm  func(os.FileMode, bool) os.FileMode
		code  int
		want  string
		where string // "stdout" or "stderr"
	}{
		{"readable by others", func(m os.FileMode, d bool) os.FileMode {
			if d {
				return 0o755
			}
			return 0o644
		}, 0, "tool_execute", "stdout"},
		{"private to its owner", func(m os.FileMode, d bool) os.FileMode {
			if d {
				return 0o700
			}
			return 0o600
		}, 1, store.CodePermission, "stderr"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			project := filepath.Join(base, fmt.Sprint("p", i))
			must(os.Mkdir(project, 0o755))
			src := seedProject(t)
			must(os.CopyFS(filepath.Join(project, ".fluffy"), os.DirFS(filepath.Join(src, ".fluffy"))))
			dir := store.DefaultDir(project)
			chmodTree(t, filepath.Join(project, ".fluffy"), c.perm)
			must(os.Chmod(filepath.Join(project, ".fluffy"), 0o755))
			before := dbListing(t, dir)
			cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "audit", "log", "--project", project)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "FLUFFY_HOME=" + home}
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			text := out.String()
			if c.where == "stderr" {
				text = errb.String()
			}
			if code != c.code || !strings.Contains(text, c.want) || strings.Contains(out.String()+errb.String(), store.CodeCorrupt) {
				t.Fatalf("exit %d (want %d), want %q in %s, no %s:\nstdout: %s\nstderr: %s", code, c.code, c.want, c.where, store.CodeCorrupt, out.String(), errb.String())
			}
			if after := dbListing(t, dir); after != before {
				t.Fatalf("the database changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func copyExec(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// A database moved aside as damaged is shown by `audit verify` as a gap
// naming where it went.
func TestAuditVerifyShowsQuarantine(t *testing.T) {
	project := seedProject(t)
	dir := store.DefaultDir(project)
	seedMore := func() {
		l, err := audit.Open(context.Background(), audit.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(context.Background(), audit.Event{Type: audit.EventToolExecute, ToolName: "read_file"}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	seedMore()
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	sort.Strings(ssts)
	if len(ssts) < 2 {
		t.Fatalf("setup: %d tables", len(ssts))
	}
	fi, _ := os.Stat(ssts[len(ssts)-1])
	if err := os.Truncate(ssts[len(ssts)-1], fi.Size()/3); err != nil {
		t.Fatal(err)
	}
	seedMore() // a writable open: recovery moves the database aside
	qs, _ := filepath.Glob(dir + ".corrupt-*")
	if len(qs) != 1 {
		t.Fatalf("quarantines: %v", qs)
	}
	for _, all := range []bool{false, true} {
		args := []string{"audit", "verify", "--project", project}
		if all {
			args = append(args, "--all")
		}
		e, out, errb := auditTestEnv()
		if code := run(args, e); code != 0 || !strings.Contains(out.String(), "GAP before record") || !strings.Contains(out.String(), qs[0]) {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errb)
		}
	}
}
