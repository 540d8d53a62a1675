package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestReplace(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name    string
		old     string // "" = no old file
		o       Options
		write   func(io.Writer) error
		perm    fs.FileMode
		want    string
		wantErr error
	}{
		{name: "new file", write: text("new"), perm: 0o644, want: "new"},
		{name: "replaces", old: "old", write: text("new"), perm: 0o600, want: "new"},
		{name: "group-writable despite the umask", write: text("x"), perm: 0o664, want: "x"},
		{name: "no sync", old: "old", o: Options{NoSync: true}, write: text("fast"), perm: 0o644, want: "fast"},
		{name: "named temp", o: Options{Temp: ".op-1.tmp"}, write: text("n"), perm: 0o644, want: "n"},
		{name: "failed write keeps the old file", old: "old", write: func(w io.Writer) error {
			_, _ = io.WriteString(w, "half")
			return boom
		}, perm: 0o644, want: "old", wantErr: boom},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "f.txt")
			if c.old != "" {
				if err := os.WriteFile(p, []byte(c.old), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := Replace(OS{}, p, c.perm, c.o, c.write)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			got, _ := os.ReadFile(p)
			if string(got) != c.want {
				t.Fatalf("content = %q, want %q", got, c.want)
			}
			if c.wantErr == nil {
				fi, _ := os.Stat(p)
				if fi.Mode().Perm() != c.perm {
					t.Fatalf("mode = %v, want %v", fi.Mode().Perm(), c.perm)
				}
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Fatalf("directory holds %d entries (a temporary left behind?): %v", len(entries), entries)
			}
		})
	}
}

func TestReplaceInsideARootCannotLeaveIt(t *testing.T) {
	outer := t.TempDir()
	inner := filepath.Join(outer, "project")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(inner)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := Replace(root, "a.txt", 0o644, Options{}, text("in")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(inner, "a.txt")); string(b) != "in" {
		t.Fatalf("a.txt = %q", b)
	}
	if err := Replace(root, "../escape.txt", 0o644, Options{}, text("out")); err == nil {
		t.Fatal("a name leaving the root was written")
	}
	if _, err := os.Stat(filepath.Join(outer, "escape.txt")); err == nil {
		t.Fatal("escape.txt exists outside the root")
	}
}

func TestWriteAndWriteFunc(t *testing.T) {
	p := filepath.Join(t.TempDir(), "w")
	if err := Write(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFunc(p, 0o600, text("two")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "two" {
		t.Fatalf("content = %q", b)
	}
}

func text(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}
