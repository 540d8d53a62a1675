package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/y"
	pkgerrors "github.com/pkg/errors"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestOpenErrorClassification(t *testing.T) {
	cases := []struct {
		name    string
		err     error
		corrupt bool
		code    string
	}{
		{"EACCES wrapped", fmt.Errorf("open 000001.sst: %w", &os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}), false, CodePermission},
		{"EPERM via pkg/errors", pkgerrors.Wrapf(syscall.EPERM, "while opening memtables"), false, CodePermission},
		{"EIO flattened to text", errors.New("while reading table: read 000002.sst: input/output error"), false, CodeIO},
		{"ENOSPC", fmt.Errorf("create vlog: %w", syscall.ENOSPC), false, CodeNoSpace},
		{"EDQUOT", fmt.Errorf("write: %w", syscall.EDQUOT), false, CodeNoSpace},
		{"EROFS", fmt.Errorf("open LOCK: %w", syscall.EROFS), false, CodeReadOnlyFS},
		{"badger lock", errors.New("Cannot acquire directory lock on \"db\".  Another process is using this Badger database."), false, CodeLocked},
		{"our lock", errBusy, false, CodeLocked},
		{"EWOULDBLOCK", syscall.EWOULDBLOCK, false, CodeLocked},
		{"other errno is not damage", fmt.Errorf("mmap: %w", syscall.EINVAL), false, CodeOpen},
		{"unknown error is not damage", errors.New("something odd"), false, CodeOpen},
		{"checksum mismatch", pkgerrors.Wrapf(y.ErrChecksumMismatch, "table 3"), true, ""},
		{"bad magic", errors.New("manifest has bad magic"), true, ""},
		{"panic", errors.New("badger panicked while opening: index out of range"), true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := isCorruption(c.err); got != c.corrupt {
				t.Fatalf("isCorruption = %v, want %v", got, c.corrupt)
			}
			if c.corrupt {
				return
			}
			err := classifyOpenError("/p/.fluffy/db", "", c.err)
			if !uerr.HasCode(err, c.code) {
				t.Fatalf("classifyOpenError = %v, want %s", err, c.code)
			}
			var ue *uerr.Error
			if !errors.As(err, &ue) || ue.Fix == "" || ue.Why == "" {
				t.Fatalf("not a structured error with why and fix: %#v", err)
			}
		})
	}
}

// listing is every file under dir with its size, mode and mtime.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%s %d %v %d", p, fi.Size(), fi.Mode(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func siblings(t *testing.T, dir string) []string {
	m, _ := filepath.Glob(dir + ".corrupt-*")
	return m
}

// An unreadable table (another user's files) is a permission error: the
// database is not moved aside and nothing in it changes.
func TestOpenUnreadableTableIsNotDamage(t *testing.T) {
	if os.Getuid() == 0 {
		testUnreadableAsOtherUser(t)
		return
	}
	dir := filepath.Join(t.TempDir(), ".fluffy", "db")
	session(t, dir, 0, 10)
	ssts := files(t, dir, "sst")
	if len(ssts) == 0 {
		t.Fatal("no table written")
	}
	for _, s := range ssts {
		os.Chmod(s, 0)
	}
	t.Cleanup(func() {
		for _, s := range ssts {
			os.Chmod(s, 0o600)
		}
	})
	before := listing(t, dir)
	_, err := Open(context.Background(), Options{Dir: dir})
	if !uerr.HasCode(err, CodePermission) {
		t.Fatalf("Open: %v, want %s", err, CodePermission)
	}
	if q := siblings(t, dir); len(q) > 0 {
		t.Fatalf("database moved aside: %v", q)
	}
	if after := listing(t, dir); after != before {
		t.Fatalf("files changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// testUnreadableAsOtherUser opens, as user nobody, a database whose tables
// only root can read, in a directory nobody cannot rename in.
func testUnreadableAsOtherUser(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("setpriv (util-linux) is needed to test as another user")
		}
		t.Skip("setpriv not installed; run the test as a non-root user instead")
	}
	base, err := os.MkdirTemp("", "store-other-user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	dir := filepath.Join(base, "db")
	session(t, dir, 0, 10)
	os.Chmod(base, 0o755)
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Join(dir, "MANIFEST"), 0o644)
	os.Chmod(lockPath(dir), 0o666)
	if len(files(t, dir, "sst")) == 0 {
		t.Fatal("no table written")
	}
	bin := filepath.Join(base, "store.test")
	copyFile(t, os.Args[0], bin)
	before := listing(t, dir)

	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestHelperOpenAsOtherUser$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FLUFFY_STORE_HELPER_DIR="+dir)
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "CODE="+CodePermission) || strings.Contains(string(out), CodeCorrupt) {
		t.Fatalf("open as nobody, want %s and no %s:\n%s", CodePermission, CodeCorrupt, out)
	}
	if q := siblings(t, dir); len(q) > 0 {
		t.Fatalf("database moved aside: %v", q)
	}
	if after := listing(t, dir); after != before {
		t.Fatalf("files changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestHelperOpenAsOtherUser runs only as the child of
// testUnreadableAsOtherUser.
func TestHelperOpenAsOtherUser(t *testing.T) {
	dir := os.Getenv("FLUFFY_STORE_HELPER_DIR")
	if dir == "" {
		return
	}
	db, err := Open(context.Background(), Options{Dir: dir, Now: func() time.Time { return time.Unix(0, 0) }})
	if err == nil {
		db.Close()
		fmt.Println("CODE=none")
		return
	}
	var ue *uerr.Error
	if errors.As(err, &ue) {
		fmt.Printf("CODE=%s %v\n", ue.Code, err)
		return
	}
	fmt.Printf("CODE=unstructured %v\n", err)
}

func copyFile(t *testing.T, src, dst string) {
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
