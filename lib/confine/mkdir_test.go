package confine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestMkdirAllNeverFollowsLinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(base, outside string) error
		rel   string
		code  string // "" = success
	}{
		{"new chain", func(string, string) error { return nil }, "a/b/c", ""},
		{"existing", func(b, _ string) error { return os.MkdirAll(filepath.Join(b, "a", "b"), 0o755) }, "a/b", ""},
		{"link last", func(b, o string) error { return os.Symlink(o, filepath.Join(b, "out")) }, "out", CodeSymlink},
		{"link in the middle", func(b, o string) error { return os.Symlink(o, filepath.Join(b, "a")) }, "a/b", CodeSymlink},
		{"relative link", func(b, _ string) error {
			if err := os.Mkdir(filepath.Join(b, "real"), 0o755); err != nil {
				return err
			}
			return os.Symlink("real", filepath.Join(b, "a"))
		}, "a/b", CodeSymlink},
		{"file in the way", func(b, _ string) error { return os.WriteFile(filepath.Join(b, "a"), nil, 0o644) }, "a/b", CodeInvalid},
		{"escape", func(string, string) error { return nil }, "../x", CodeEscapes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, outside := t.TempDir(), t.TempDir()
			if err := tc.plant(base, outside); err != nil {
				t.Fatal(err)
			}
			f, err := MkdirAll(base, tc.rel, 0o750)
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if f.Name() != filepath.Join(base, tc.rel) {
					t.Fatalf("name %s", f.Name())
				}
				if fi, err := os.Lstat(filepath.Join(base, tc.rel)); err != nil || !fi.IsDir() {
					t.Fatalf("not a directory: %v %v", fi, err)
				}
				return
			}
			if !uerr.HasCode(err, tc.code) {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("created %d entries outside base", len(ents))
			}
		})
	}
}
