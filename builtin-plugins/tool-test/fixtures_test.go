package main

import (
	"os"
	"path/filepath"
	"testing"
)

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
	"nodered": {
		"package.json": `{"name":"nodered","version":"1.0.0"}`,
		"add.js":       "exports.add = (a, b) => a + b;\n",
		"add.test.js":  "const test = require('node:test');\nconst assert = require('node:assert');\nconst { add } = require('./add');\ntest('adds', () => { assert.strictEqual(add(1, 2), 4); });\ntest('ok', () => {});\n",
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
		files["go.mod"] = "module example.com/" + name + "\n\ngo 1.22\n"
		for f, c := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte(c), 0o644); err != nil {
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
