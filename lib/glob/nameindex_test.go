package glob

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestNameIndexMatchesScan: a Set answers its literal any-depth names
// ("go.mod", ".github/") and suffixes ("*.lock", "*.config.js") through
// maps; the answer must be the one the
// patterns give one by one, for files and directories at every depth,
// with excludes, and when one name is listed both as file and directory.
func TestNameIndexMatchesScan(t *testing.T) {
	sets := [][]string{
		{"go.mod", "package.json", ".github/", "*.lock", "/Makefile", "src/**"},
		{".cargo/", ".cargo"},
		{".cargo", ".cargo/"},
		{"build/", "!build/keep.txt", "Dockerfile", "Dockerfile.*"},
		{"tests/", "testdata/", "*_test.go", "conftest.py"},
		{"*.lock", "*.config.js", "*.js", "*.pem/", "*.", ".env.*", "*.tar.gz"},
	}
	segs := []string{"go.mod", "package.json", ".github", ".cargo", "build", "keep.txt", "Dockerfile", "Dockerfile.dev",
		"yarn.lock", "Makefile", "src", "a", "tests", "testdata", "x_test.go", "conftest.py", "x.go",
		".lock", "lock", "vite.config.js", "config.js", ".js", "a.pem", "b.", ".env.local", "x.tar.gz", "gz"}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, pats := range sets {
		s := MustCompileSet(pats...)
		var ps []*Pattern
		for _, raw := range pats {
			p, err := Compile(raw)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		for range 3000 {
			n := 1 + rng.IntN(4)
			parts := make([]string, n)
			for i := range parts {
				parts[i] = segs[rng.IntN(len(segs))]
			}
			raw := strings.Join(parts, "/")
			if rng.IntN(3) == 0 {
				raw += "/"
			}
			pth := ParsePath(raw)
			want := false
			for _, p := range ps {
				if !p.Negated() && p.Match(pth) {
					want = true
				}
			}
			for _, p := range ps {
				if p.Negated() && p.Match(pth) {
					want = false
				}
			}
			if got := s.Match(pth); got != want {
				t.Fatalf("set %q, path %q: Match = %v, the patterns one by one say %v", pats, raw, got, want)
			}
		}
	}
}
