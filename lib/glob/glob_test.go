package glob

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestVectors(t *testing.T) {
	for _, v := range append(append([]vector(nil), vectors...), divergences...) {
		s, err := CompileSet(v.patterns)
		if err != nil {
			t.Fatalf("%v: %v", v.patterns, err)
		}
		if got := s.MatchString(v.path); got != v.want {
			t.Errorf("patterns %q path %q: got %v want %v", v.patterns, v.path, got, v.want)
		}
	}
}

// gitIgnored runs `git check-ignore --no-index` for path in a fresh repo
// whose .gitignore holds patterns. Directories (trailing slash) and files
// are created on disk because git decides "is a directory" from the disk.
func gitIgnored(t *testing.T, patterns []string, path string) bool {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) (int, string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return 0, string(out)
	}
	if code, out := run("init", "-q", "."); code != 0 {
		t.Fatalf("git init: %s", out)
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(strings.Join(patterns, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, filepath.FromSlash(strings.TrimSuffix(path, "/")))
	if strings.HasSuffix(path, "/") {
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out := run("check-ignore", "--no-index", "-q", path)
	switch code {
	case 0:
		return true
	case 1:
		return false
	}
	t.Fatalf("git check-ignore %q with %q: exit %d: %s", path, patterns, code, out)
	return false
}

// TestVectorsAgreeWithGit is what keeps the table honest: every vector is
// replayed through the real git.
func TestVectorsAgreeWithGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is required to check the glob vectors: %v", err)
	}
	for _, v := range vectors {
		if got := gitIgnored(t, v.patterns, v.path); got != v.want {
			t.Errorf("git check-ignore disagrees with the table: patterns %q path %q: git=%v table=%v", v.patterns, v.path, got, v.want)
		}
	}
	for _, v := range divergences {
		if got := gitIgnored(t, v.patterns, v.path); got == v.want {
			t.Errorf("documented divergence no longer diverges: patterns %q path %q: git=%v", v.patterns, v.path, got)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, p := range []string{"", " src/**", "src/** ", "#comment", "/", "a//b", "[a-", "abc\\"} {
		if _, err := Compile(p); err == nil {
			t.Errorf("Compile(%q): want error", p)
		} else {
			var ge *Error
			if !errors.As(err, &ge) || ge.Pattern != p {
				t.Errorf("Compile(%q): error %v does not name the pattern", p, err)
			}
		}
	}
}

func TestSetEdges(t *testing.T) {
	empty, _ := CompileSet(nil)
	if empty.MatchString("a") {
		t.Error("empty set matched")
	}
	onlyExclude, _ := CompileSet([]string{"!a"})
	if onlyExclude.MatchString("b") || onlyExclude.HasInclude() {
		t.Error("exclude-only set matched")
	}
	all := MustCompileSet("**")
	if all.MatchString("") {
		t.Error("empty path matched")
	}
	if got := ParsePath("./a//b/./c/").String(); got != "a/b/c/" {
		t.Errorf("ParsePath clean: %q", got)
	}
}

func BenchmarkGlobMatch(b *testing.B) {
	s := MustCompileSet("src/**", "tests/**", "*.md", "!src/vendor/")
	p := ParsePath("src/pkg/deep/file.go")
	b.ReportAllocs()
	for b.Loop() {
		if !s.Match(p) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkGlobMatchAnyDepth(b *testing.B) {
	s := MustCompileSet("*.pem", ".env*", "id_rsa*", ".ssh/", "secrets/")
	p := ParsePath("a/b/c/d/e/file.go")
	b.ReportAllocs()
	for b.Loop() {
		if s.Match(p) {
			b.Fatal("match")
		}
	}
}

// TestManyDoubleStarsStayPolynomial: backtracking is bounded, so a hostile
// pattern against a deep path finishes (an exponential matcher would not).
func TestManyDoubleStarsStayPolynomial(t *testing.T) {
	s := MustCompileSet("**/a/**/a/**/a/**/a/**/a/**/a/**/b")
	deep := strings.Repeat("a/", 400) + "c"
	if s.MatchString(deep) {
		t.Fatal("matched")
	}
	if !s.MatchString(strings.Repeat("a/", 400) + "b") {
		t.Fatal("did not match")
	}
}

func TestMatchSelf(t *testing.T) {
	cases := []struct {
		pat, path string
		self, any bool // MatchSelf, Match
	}{
		{"build", "build/", true, true},
		{"build", "build/x.o", false, true}, // only through the ancestor
		{"important/", "important/a.log", false, true},
		{"important/", "important/", true, true},
		{"*.log", "a/b.log", true, true},
		{"a/**", "a/x/y", true, true},
		{"a/**", "a/", false, false},
		{"/a/b", "a/b", true, true},
		{"/a/b", "a/b/c", false, true},
		{"dir/", "dir", false, false}, // a file named dir
	}
	for _, c := range cases {
		p, err := Compile(c.pat)
		if err != nil {
			t.Fatal(err)
		}
		pth := ParsePath(c.path)
		if got := p.MatchSelf(pth); got != c.self {
			t.Errorf("%q.MatchSelf(%q) = %v, want %v", c.pat, c.path, got, c.self)
		}
		if got := p.Match(pth); got != c.any {
			t.Errorf("%q.Match(%q) = %v, want %v", c.pat, c.path, got, c.any)
		}
	}
}
