package toolpath

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestClean(t *testing.T) {
	cases := []struct{ in, want, code string }{
		{"", ".", ""},
		{".", ".", ""},
		{"src/a.go", "src/a.go", ""},
		{"src/../a.go", "a.go", ""},
		{"src\\a.go", "", "FS_PATH_INVALID"}, // the policy cannot judge it (backslash escapes globs)
		{"/etc/passwd", "", "FS_PATH_ABSOLUTE"},
		{"..", "", "FS_PATH_ESCAPES"},
		{"a/../../b", "", "FS_PATH_ESCAPES"},
		{"a\x00b", "", "FS_PATH_INVALID"},
	}
	for _, c := range cases {
		got, err := Clean(c.in)
		if c.code != "" {
			if !uerr.HasCode(err, c.code) {
				t.Errorf("Clean(%q) err=%v, want %s", c.in, err, c.code)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Clean(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestErrThroughRoot(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "leak"))
	r, err := OpenRoot("test", ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Open("leak")
	if !uerr.HasCode(Err("leak", err), "FS_PATH_ESCAPES") {
		t.Fatalf("symlink out: %v", Err("leak", err))
	}
	_, err = r.Open("nope")
	if !uerr.HasCode(Err("nope", err), "FS_NOT_FOUND") {
		t.Fatalf("missing: %v", Err("nope", err))
	}
	if _, err := OpenRoot("test", ""); !uerr.HasCode(err, "FS_NOT_CONFIGURED") {
		t.Fatalf("empty workspace: %v", err)
	}
}
