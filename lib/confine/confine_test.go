package confine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		p, bad string
	}{
		{"src/a.go", ""},
		{"./src//a.go", ""},
		{"dir/", ""},
		{".fluffy/db/x", ""},
		{"", "empty path"},
		{".", "empty path"},
		{"./", "empty path"},
		{"/etc/passwd", "absolute path; policy paths are project-relative"},
		{"a/../b", "path leaves the project (..)"},
		{"..", "path leaves the project (..)"},
		{"a/..", "path leaves the project (..)"},
		{"a\\b", "path contains a backslash or NUL byte"},
		{"a\x00b", "path contains a backslash or NUL byte"},
		{"a/..b", ""},
		{"...", ""},
	} {
		if got := Check(tc.p); got != tc.bad {
			t.Errorf("Check(%q) = %q, want %q", tc.p, got, tc.bad)
		}
	}
}

func TestCleanAndWritable(t *testing.T) {
	for _, tc := range []struct {
		p, clean, code, wcode string
	}{
		{"src/a.go", "src/a.go", "", ""},
		{"./src//b/../a.go", "src/a.go", "", ""},
		{"", ".", "", CodeInvalid},
		{"..", "", CodeEscapes, CodeEscapes},
		{"a/../../b", "", CodeEscapes, CodeEscapes},
		{"/abs", "", CodeAbsolute, CodeAbsolute},
		{"a\x00", "", CodeInvalid, CodeInvalid},
		{".fluffy/db/000001.vlog", ".fluffy/db/000001.vlog", "", CodeReserved},
		{".FLUFFY/policy.yaml", ".FLUFFY/policy.yaml", "", CodeReserved},
		{"x/../.fluffy", ".fluffy", "", CodeReserved},
		{".git/hooks/pre-commit", ".git/hooks/pre-commit", "", CodeReserved},
		{"vendor/lib/.GIT/config", "vendor/lib/.GIT/config", "", CodeReserved},
		{".gitignore", ".gitignore", "", ""},
		{".github/workflows/ci.yml", ".github/workflows/ci.yml", "", ""},
	} {
		c, err := Clean(tc.p)
		if code := codeOf(err); code != tc.code || (err == nil && c != tc.clean) {
			t.Errorf("Clean(%q) = %q, %v; want %q, code %q", tc.p, c, err, tc.clean, tc.code)
		}
		_, err = Writable(tc.p)
		if code := codeOf(err); code != tc.wcode {
			t.Errorf("Writable(%q): %v; want code %q", tc.p, err, tc.wcode)
		}
	}
}

func TestName(t *testing.T) {
	for _, ok := range []string{"op-1", "a.b", "..."} {
		if err := Name(ok); err != nil {
			t.Errorf("Name(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "a\x00"} {
		if err := Name(bad); codeOf(err) != CodeInvalid {
			t.Errorf("Name(%q) = %v, want %s", bad, err, CodeInvalid)
		}
	}
}

func codeOf(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := uerr.As(err); ok {
		return e.Code
	}
	return "unstructured: " + err.Error()
}

// tree builds a project with every kind of link the resolver must handle.
func tree(t *testing.T) (*Root, string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "proj")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "docs"), 0o755))
	must(os.MkdirAll(filepath.Join(dir, "src", "pkg"), 0o755))
	must(os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=1\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "src", "pkg", "a.go"), []byte("package pkg\n"), 0o644))
	must(os.WriteFile(filepath.Join(base, "outside"), []byte("host file\n"), 0o644))
	must(os.Symlink("../.env", filepath.Join(dir, "docs", "notes.txt")))
	must(os.Symlink("src/pkg", filepath.Join(dir, "pkglink")))
	must(os.Symlink("../outside", filepath.Join(dir, "up")))
	must(os.Symlink(filepath.Join(base, "outside"), filepath.Join(dir, "abs")))
	must(os.Symlink("loop2", filepath.Join(dir, "loop1")))
	must(os.Symlink("loop1", filepath.Join(dir, "loop2")))
	must(os.Symlink("docs/notes.txt", filepath.Join(dir, "chain")))
	must(os.Symlink("../../docs", filepath.Join(dir, "src", "pkg", "back")))
	r, err := OpenRoot(dir)
	must(err)
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func TestResolve(t *testing.T) {
	r, _ := tree(t)
	for _, tc := range []struct {
		rel, want, code string
	}{
		{"src/pkg/a.go", "src/pkg/a.go", ""},
		{"docs/notes.txt", ".env", ""},
		{"chain", ".env", ""},
		{"pkglink/a.go", "src/pkg/a.go", ""},
		{"pkglink/back/notes.txt", ".env", ""},
		{"src/pkg/back/../src", "", CodeNotFound}, // cleaned lexically first: src/pkg/src
		{"up", "", CodeEscapes},
		{"abs", "", CodeEscapes},
		{"loop1", "", CodeInvalid},
		{"missing/x", "", CodeNotFound},
		{"pkglink/missing", "", CodeNotFound},
		{"../x", "", CodeEscapes},
		{".", ".", ""},
	} {
		got, err := r.Resolve(tc.rel)
		if code := codeOf(err); code != tc.code || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q, code %q", tc.rel, got, err, tc.want, tc.code)
		}
	}
	f, canon, err := r.Open("docs/notes.txt")
	if err != nil || canon != ".env" {
		t.Fatalf("Open through a link: %v %q", err, canon)
	}
	f.Close()
}

func TestNoLinks(t *testing.T) {
	r, _ := tree(t)
	for _, tc := range []struct{ rel, code string }{
		{"src/pkg/a.go", ""},
		{"src/pkg/new/dir/file.go", ""},
		{"newdir/file", ""},
		{"docs/notes.txt", CodeSymlink},
		{"pkglink/a.go", CodeSymlink},
		{"pkglink/new.go", CodeSymlink},
		{"src/pkg/a.go/x", CodeInvalid},
		{"../x", CodeEscapes},
	} {
		if code := codeOf(r.NoLinks(tc.rel)); code != tc.code {
			t.Errorf("NoLinks(%q): code %q, want %q", tc.rel, code, tc.code)
		}
	}
}
