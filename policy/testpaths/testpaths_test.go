package testpaths

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestDefaultClassification: each language's own convention, wherever the
// file is, and the look-alikes that are source.
func TestDefaultClassification(t *testing.T) {
	s := MustDefault()
	cases := []struct {
		lang, path string
		test       bool
	}{
		// Go: _test.go beside the code, at the root or in a package; testdata/.
		{"go", "csv_test.go", true},
		{"go", "internal/csv/csv_test.go", true},
		{"go", "testdata/golden.csv", true},
		{"go", "internal/csv/testdata/in.json", true},
		{"go", "csv.go", false},
		{"go", "cmd/tool/main.go", false},
		{"go", "testing.go", false},
		{"go", "test_helpers.go", false},
		// pytest: test_*.py, *_test.py, conftest.py, tests/.
		{"python", "test_app.py", true},
		{"python", "mypkg/test_app.py", true},
		{"python", "mypkg/app_test.py", true},
		{"python", "conftest.py", true},
		{"python", "mypkg/conftest.py", true},
		{"python", "tests/helpers.py", true},
		{"python", "mypkg/app.py", false},
		{"python", "mypkg/__init__.py", false},
		{"python", "contest.py", false},
		{"python", "testing.py", false},
		// Jest / Vitest / node --test.
		{"js", "lib/parse.test.js", true},
		{"js", "src/parse.test.ts", true},
		{"js", "parse.spec.tsx", true},
		{"js", "__tests__/parse.js", true},
		{"js", "lib/__tests__/deep/parse.ts", true},
		{"js", "lib/parse.js", false},
		{"js", "index.ts", false},
		{"js", "lib/contest.js", false},
		// Rust: tests/ for integration tests; benches and src are source.
		{"rust", "tests/integration.rs", true},
		{"rust", "crates/core/tests/it.rs", true},
		{"rust", "src/lib.rs", false},
		{"rust", "benches/bench.rs", false},
		{"rust", "src/tests.rs", false},
		// A test/ directory in any language.
		{"common", "test/parse.js", true},
		{"common", "test/unit/a.sh", true},
		{"common", "pkg/test/a.c", true},
		{"common", "testx/a.c", false},
		{"common", "latest/a.c", false},
	}
	for _, c := range cases {
		t.Run(c.lang+"/"+c.path, func(t *testing.T) {
			if got := s.IsTest(c.path); got != c.test {
				t.Fatalf("IsTest(%q) = %v, want %v (patterns: %s)", c.path, got, c.test, s)
			}
		})
	}
}

func TestFromYAML(t *testing.T) {
	node := func(t *testing.T, src string) *yaml.Node {
		t.Helper()
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Content[0]
	}
	t.Run("override, add, remove", func(t *testing.T) {
		s, err := FromYAML("p.yaml", node(t, "go: [\"*_test.go\"]\ne2e: [\"/e2e/\"]\nrust: []\n"))
		if err != nil {
			t.Fatal(err)
		}
		if s.IsTest("testdata/x") || !s.IsTest("e2e/login.go") || !s.IsTest("a_test.go") || !s.IsTest("test_a.py") || s.IsTest("x/e2e/a.go") {
			t.Fatalf("patterns: %s", s.Describe())
		}
		if _, ok := s.Groups()["rust"]; ok {
			t.Fatal("rust not removed")
		}
	})
	t.Run("nil is the default", func(t *testing.T) {
		s, err := FromYAML("p.yaml", nil)
		if err != nil || s.String() != MustDefault().String() {
			t.Fatalf("%v %q", err, s)
		}
	})
	bad := []struct{ name, src, want string }{
		{"bad glob", "go: [\"[\"]\n", "bad glob"},
		{"not a list", "go: \"*_test.go\"\n", "must be a list"},
		{"not a mapping", "[\"*_test.go\"]\n", "must be a mapping"},
		{"not a string", "go: [[\"a\"]]\n", "must list strings"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromYAML("p.yaml", node(t, c.src))
			if !uerr.HasCode(err, CodeInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %s containing %q", err, CodeInvalid, c.want)
			}
			if ue, _ := uerr.As(err); !strings.HasPrefix(ue.Context, "p.yaml:") {
				t.Fatalf("no file:line context: %+v", ue)
			}
		})
	}
}
