package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goUndefinedLines is n statements, each naming a type that does not
// exist (Frame1, Frame2, ...).
func goUndefinedLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "\tvar _ = Frame%d{}\n", i)
	}
	return b.String()
}

// goFixtures are tiny real Go modules, one per classification.
var goFixtures = map[string]map[string]string{
	"green": {
		"a.go":      "package a\n\nfunc Add(a, b int) int { return a + b }\n",
		"a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n\nfunc TestLater(t *testing.T) { t.Skip(\"later\") }\n",
	},
	"red": {
		"a.go":      "package a\n\nfunc Add(a, b int) int { return a + b }\n",
		"a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif got := Add(1, 2); got != 4 {\n\t\tt.Fatalf(\"Add(1, 2) = %d, want 4\", got)\n\t}\n}\n\nfunc TestOK(t *testing.T) {}\n",
	},
	"undefined": {
		"a.go":      "package a\n\nfunc Add(a, b int) int { return a + b }\n",
		"a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tif Sub(3, 2) != 1 {\n\t\tt.Fatal(\"bad\")\n\t}\n}\n",
	},
	"builderr": {
		"a.go":      "package a\n\nfunc Add(a, b int) int { return a + b + \"x\" }\n",
		"a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {}\n",
	},
	"notests": {
		"a.go": "package a\n\nfunc Add(a, b int) int { return a + b }\n",
	},
	// A kata as a model meets it: the stub does not compile (a method of
	// a type not written yet) and the tests name 12 more things that do
	// not exist, past the compiler's default limit of ten errors.
	"gokata": {
		"bowling.go":      "package bowling\n\nfunc (g *Game) Roll(pins int) {}\n",
		"bowling_test.go": "package bowling\n\nimport \"testing\"\n\nfunc TestGame(t *testing.T) {\n" + goUndefinedLines(12) + "}\n",
		"other/other.go":  "package other\n\nfunc F() int { return \"x\" }\n",
	},
	// A dependency the sandbox cannot fetch: no change to the code fixes
	// it there.
	"gomissingmod": {
		"a.go":      "package a\n\nimport \"github.com/nonexistent-owner/nonexistent\"\n\nvar _ = nonexistent.X\n",
		"a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
	},
	// go.mod needs a toolchain newer than the sandbox's.
	"gotoonew": {
		"go.mod":    "module example.com/gotoonew\n\ngo 1.99\n",
		"a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
	},
	"sleep": {
		"a_test.go": "package a\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestQuick(t *testing.T) {}\n\nfunc TestSleep(t *testing.T) { time.Sleep(time.Hour) }\n",
	},
	"panic": {
		"a_test.go": "package a\n\nimport \"testing\"\n\nfunc TestPanic(t *testing.T) { var m map[string]int; m[\"x\"] = 1 }\n",
	},
	// poison passes only if nothing outside the run's scratch directory
	// is writable: the build cache, the output directory, /tmp.
	"poison": {
		"a_test.go": `package a

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCannotPoison(t *testing.T) {
	for _, d := range []string{"/cache", "/cache/go-build", "/out", os.Getenv("POISON_DIR")} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(d); err != nil {
			continue
		}
		p := filepath.Join(d, "poisoned-by-test")
		if err := os.WriteFile(p, []byte("x"), 0o644); err == nil {
			t.Errorf("wrote %s", p)
		}
		if err := os.Mkdir(filepath.Join(d, "poisoned-dir"), 0o755); err == nil {
			t.Errorf("made a directory in %s", d)
		}
	}
	// The test binary may be kept in the build cache for the next run:
	// it must not alter itself or put anything beside itself.
	if exe, err := os.Executable(); err == nil {
		if err := os.WriteFile(filepath.Join(filepath.Dir(exe), "poisoned-by-test"), []byte("x"), 0o644); err == nil {
			t.Errorf("wrote beside the test binary in %s", filepath.Dir(exe))
		}
		if err := os.Rename(exe, exe+".moved"); err == nil {
			t.Errorf("moved the test binary %s", exe)
		}
		if f, err := os.OpenFile(exe, os.O_WRONLY, 0); err == nil {
			f.Close()
			t.Errorf("opened the test binary %s for writing", exe)
		}
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "ok"), []byte("x"), 0o644); err != nil {
		t.Errorf("scratch not writable: %v", err)
	}
}
`,
	},
}

// nodeFixtures are tiny real node projects (node --test).
var nodeFixtures = map[string]map[string]string{
	"nodegreen": {
		"package.json": `{"name":"nodegreen","version":"1.0.0"}`,
		"add.js":       "exports.add = (a, b) => a + b;\n",
		"add.test.js":  "const test = require('node:test');\nconst assert = require('node:assert');\nconst { add } = require('./add');\ntest('adds', () => { assert.strictEqual(add(1, 2), 3); });\n",
	},
	// nodecov: sub is never called, so lib.js is partly covered.
	"nodecov": {
		"package.json": `{"name":"nodecov","version":"1.0.0"}`,
		"lib.js":       "exports.add = (a, b) => a + b;\nexports.sub = (a, b) => {\n  const d = a - b;\n  return d;\n};\n",
		"lib.test.js":  "const test = require('node:test');\nconst assert = require('node:assert');\nconst { add } = require('./lib');\ntest('adds', () => { assert.strictEqual(add(1, 2), 3); });\n",
	},
	"nodered": {
		"package.json": `{"name":"nodered","version":"1.0.0"}`,
		"add.js":       "exports.add = (a, b) => a + b;\n",
		"add.test.js":  "const test = require('node:test');\nconst assert = require('node:assert');\nconst { add } = require('./add');\ntest('adds', () => { assert.strictEqual(add(1, 2), 4); });\ntest('ok', () => {});\n",
	},
	// A new test of a function not written yet: calling undefined throws
	// a TypeError inside the test.
	"nodeundefined": {
		"package.json": `{"name":"nodeundefined","version":"1.0.0"}`,
		"add.js":       "exports.add = (a, b) => a + b;\n",
		"sub.test.js":  "const test = require('node:test');\nconst assert = require('node:assert');\nconst { sub } = require('./add');\ntest('subs', () => { assert.strictEqual(sub(3, 2), 1); });\n",
	},
	// The code under test does not load: node's junit report has only a
	// file-level failure, the same as for a test file that throws.
	"nodeloadfail": {
		"package.json": `{"name":"nodeloadfail","version":"1.0.0"}`,
		"add.js":       "exports.add = (a, b) => a +;\n",
		"add.test.js":  "const test = require('node:test');\nconst { add } = require('./add');\ntest('adds', () => { add(1, 2); });\n",
	},
	"nodenotests": {
		"package.json": `{"name":"nodenotests","version":"1.0.0"}`,
		"add.js":       "exports.add = (a, b) => a + b;\n",
	},
	"nodesleep": {
		"package.json":  `{"name":"nodesleep","version":"1.0.0"}`,
		"sleep.test.js": "const test = require('node:test');\ntest('quick', () => {});\ntest('sleeps', () => new Promise((r) => setTimeout(r, 3600e3)));\n",
	},
}

// cargoFixtures are tiny real Rust packages (no dependencies, no
// Cargo.lock: the view is read-only and cargo writes one).
var cargoFixtures = map[string]map[string]string{
	// Unit tests, an ignored test, an integration test, and a doc-test
	// that is not run (doc-tests are excluded).
	"cargogreen": {
		"src/lib.rs":  "/// Adds.\n///\n/// ```\n/// assert_eq!(cargogreen::add(1, 2), 3);\n/// ```\npub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn adds() {\n        assert_eq!(add(1, 2), 3);\n    }\n\n    #[test]\n    #[ignore]\n    fn later() {}\n}\n",
		"tests/it.rs": "#[test]\nfn adds_from_outside() {\n    assert_eq!(cargogreen::add(2, 2), 4);\n}\n",
	},
	"cargored": {
		"src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn adds() {\n        assert_eq!(add(1, 2), 4, \"Add(1, 2) want 4\");\n    }\n\n    #[test]\n    fn ok() {}\n}\n",
	},
	// A new unit test of a function not written yet: red.
	"cargoundefined": {
		"src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn subs() {\n        assert_eq!(sub(3, 2), 1);\n    }\n}\n",
	},
	// A new integration test of a function not written yet: red too.
	"cargoitundefined": {
		"src/lib.rs":  "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
		"tests/it.rs": "use cargoitundefined::mul;\n\n#[test]\nfn muls() {\n    assert_eq!(mul(2, 3), 6);\n}\n",
	},
	// The code under test does not compile: a build error, not red.
	"cargobuilderr": {
		"src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b + \"x\"\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {}\n}\n",
	},
	// The code under test calls a function that does not exist: also a
	// build error (the missing name is not in test code).
	"cargocodeundefined": {
		"src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    plus(a, b)\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(1, 2), 3);\n    }\n}\n",
	},
	// A kata: the stub does not compile (wrong return type) and the tests
	// call a method and a function that do not exist yet.
	"cargokata": {
		"src/lib.rs": "pub struct Game;\n\nimpl Game {\n    pub fn score(&self) -> u32 {\n        \"0\"\n    }\n}\n\n#[cfg(test)]\nmod tests {\n    use super::*;\n\n    #[test]\n    fn gutter() {\n        let g = Game::new();\n        assert_eq!(frames(&g), 0);\n    }\n}\n",
	},
	"cargonotests": {
		"src/lib.rs": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
	},
	// A test that takes the whole binary down: the tests it started failed.
	"cargoabort": {
		"src/lib.rs": "#[cfg(test)]\nmod tests {\n    #[test]\n    fn aborts() {\n        std::process::abort();\n    }\n}\n",
	},
	"cargosleep": {
		"src/lib.rs": "#[cfg(test)]\nmod tests {\n    #[test]\n    fn quick() {}\n\n    #[test]\n    fn sleeps() {\n        std::thread::sleep(std::time::Duration::from_secs(3600));\n    }\n}\n",
	},
	// cargopoison passes only if nothing outside the run's scratch
	// directory is writable: not the project, /cache, /out.
	"cargopoison": {
		"src/lib.rs": "#[cfg(test)]\nmod tests {\n    #[test]\n    fn cannot_poison() {\n        let poison = std::env::var(\"POISON_DIR\").unwrap_or_default();\n        for d in [\"/cache\", \"/out\", env!(\"CARGO_MANIFEST_DIR\"), poison.as_str()] {\n            if d.is_empty() {\n                continue;\n            }\n            if !std::path::Path::new(d).is_dir() {\n                continue;\n            }\n            let p = std::path::Path::new(d).join(\"poisoned-by-test\");\n            assert!(std::fs::write(&p, \"x\").is_err(), \"wrote {}\", p.display());\n        }\n        let tmp = std::env::temp_dir().join(\"ok\");\n        std::fs::write(&tmp, \"x\").expect(\"scratch not writable\");\n    }\n}\n",
	},
}

// pyFixtures are tiny real pytest projects, one per classification.
var pyFixtures = map[string]map[string]string{
	"pygreen": {
		"calc.py":      "def add(a, b):\n    return a + b\n",
		"test_calc.py": "import pytest\nfrom calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n@pytest.mark.skip(reason=\"later\")\ndef test_later():\n    pass\n",
	},
	"pyred": {
		"calc.py":      "def add(a, b):\n    return a + b\n",
		"test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 4\n\n\ndef test_ok():\n    pass\n",
	},
	// A new test of a function not written yet: pytest fails to import
	// the test module (ImportError of the name), which is red.
	"pyundefined": {
		"calc.py":      "def add(a, b):\n    return a + b\n",
		"test_calc.py": "from calc import sub\n\n\ndef test_sub():\n    assert sub(3, 2) == 1\n",
	},
	// A new test of a module not written yet, inside the project's own
	// package: red too.
	"pynewmod": {
		"shop/__init__.py": "",
		"test_cart.py":     "from shop.cart import total\n\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
	},
	// The code under test fails to import (a dependency that is not
	// there): a build error in calc.py, not the test's fault.
	"pybuilderr": {
		"calc.py":      "import nonexistent_dependency\n\n\ndef add(a, b):\n    return a + b\n",
		"test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
	},
	"pysyntax": {
		"calc.py":      "def add(a, b):\n    return a + b\n",
		"test_calc.py": "from calc import add\n\n\ndef test_add(:\n    pass\n",
	},
	// A kata: a stub, a test that fails on it, a test of a name the stub
	// does not have yet, and a test module with a syntax error.
	"pykata": {
		"bowling.py":      "class Game:\n    def roll(self, pins):\n        pass\n\n    def score(self):\n        return 0\n",
		"test_bowling.py": "from bowling import Game\n\n\ndef roll_many(g, n, pins):\n    for _ in range(n):\n        g.roll(pins)\n\n\ndef test_gutter():\n    g = Game()\n    roll_many(g, 20, 0)\n    assert g.score() == 0\n\n\ndef test_all_ones():\n    g = Game()\n    roll_many(g, 20, 1)\n    assert g.score() == 20\n",
		"test_frames.py":  "from bowling import Frame\n\n\ndef test_frame():\n    assert Frame(1, 2).total() == 3\n",
		"test_broken.py":  "from bowling import Game\n\ndef test_strike(:\n    pass\n",
	},
	"pyfixture": {
		"test_calc.py": "import pytest\n\n\n@pytest.fixture\ndef thing():\n    raise RuntimeError(\"boom\")\n\n\ndef test_uses(thing):\n    pass\n",
	},
	"pynotests": {
		"calc.py":    "def add(a, b):\n    return a + b\n",
		"pytest.ini": "[pytest]\n",
	},
	"pysleep": {
		"test_sleep.py": "import time\n\n\ndef test_quick():\n    pass\n\n\ndef test_sleep():\n    time.sleep(3600)\n",
	},
	// pypoison passes only if nothing outside the run's scratch directory
	// is writable, and the temp dir pytest hands a test is.
	"pypoison": {
		"test_poison.py": `import os


def test_cannot_poison(tmp_path):
    for d in ["/cache", "/cache/go-build", "/out", os.environ.get("POISON_DIR", ""), os.path.dirname(__file__)]:
        if not d or not os.path.isdir(d):
            continue
        p = os.path.join(d, "poisoned-by-test")
        try:
            with open(p, "w") as f:
                f.write("x")
        except OSError:
            continue
        raise AssertionError("wrote " + p)
    (tmp_path / "ok").write_text("x")
`,
	},
}

// writeGoFixtures writes every fixture as its own module under dir.
func writeGoFixtures(tb testing.TB, dir string) {
	tb.Helper()
	for name, files := range goFixtures {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		gomod := "module example.com/" + name + "\n\ngo 1.22\n"
		if c, ok := files["go.mod"]; ok {
			gomod = c
		}
		for f, c := range files {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(d, f)), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, f), []byte(c), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, "go.mod"), []byte(gomod), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for name, files := range pyFixtures {
		for f, c := range files {
			p := filepath.Join(dir, name, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	for name, files := range cargoFixtures {
		files["Cargo.toml"] = "[package]\nname = \"" + name + "\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"
		for f, c := range files {
			p := filepath.Join(dir, name, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	for name, files := range nodeFixtures {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		for f, c := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte(c), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}
