package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// hostWarmCache points FLUFFY_BUILD_CACHE at a fresh directory whose
// go-build is the host's own cache (warm; the go command is its only
// writer) and returns the directory.
func hostWarmCache(t *testing.T) string {
	t.Helper()
	t.Setenv("PATH", sandboxPath(t))
	cache := t.TempDir()
	hostCache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(strings.TrimSpace(string(hostCache)), filepath.Join(cache, "go-build")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLUFFY_BUILD_CACHE", cache)
	return cache
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for f, c := range files {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGoTestBinaryReused: a second run of unchanged code reuses the test
// binary the first run linked into the build cache (no second link),
// and a changed test is relinked and run, not the stale binary.
func TestGoTestBinaryReused(t *testing.T) {
	cache := hostWarmCache(t)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{
		"go.mod":      "module example.com/reuse\n\ngo 1.22\n",
		"add.go":      "package reuse\n\nfunc Add(a, b int) int { return a + b }\n",
		"add_test.go": "package reuse\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"sum\")\n\t}\n}\n",
	})
	out := t.TempDir()
	binary := func() (string, uint64) {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(cache, "go-test-bin", "*", "reuse.test"))
		if len(m) != 1 {
			t.Fatalf("test binaries in the cache: %v", m)
		}
		st, err := os.Stat(m[0])
		if err != nil {
			t.Fatal(err)
		}
		return m[0], st.Sys().(*syscall.Stat_t).Ino
	}
	if r := runInProcess(t, ws, out, `{}`); r.Status != testrun.Green {
		t.Fatalf("first run: %s %s", r.Status, r.Summary)
	}
	p1, ino1 := binary()
	if r := runInProcess(t, ws, out, `{}`); r.Status != testrun.Green {
		t.Fatalf("second run: %s %s", r.Status, r.Summary)
	}
	p2, ino2 := binary()
	if p1 != p2 || ino1 != ino2 {
		t.Fatalf("unchanged code was relinked: %s (inode %d) then %s (inode %d)", p1, ino1, p2, ino2)
	}
	writeTree(t, ws, map[string]string{"add_test.go": "package reuse\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 4 {\n\t\tt.Fatal(\"sum\")\n\t}\n}\n"})
	if r := runInProcess(t, ws, out, `{}`); r.Status != testrun.Red {
		t.Fatalf("changed test: %s %s (a stale binary ran?)", r.Status, r.Summary)
	}
}

// TestGoSameNamePackages: `go test -o dir/` refuses two packages of one
// name; the run still happens (without reuse) and is classified.
func TestGoSameNamePackages(t *testing.T) {
	hostWarmCache(t)
	ws := t.TempDir()
	test := "package util\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) {}\n"
	writeTree(t, ws, map[string]string{
		"go.mod":           "module example.com/twins\n\ngo 1.22\n",
		"a/util/x_test.go": test,
		"b/util/x_test.go": test,
	})
	r := runInProcess(t, ws, t.TempDir(), `{}`)
	if r.Status != testrun.Green || r.Counts.Passed != 2 {
		t.Fatalf("status %s, %d passed: %s", r.Status, r.Counts.Passed, r.Summary)
	}
}
