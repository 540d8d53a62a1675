package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// hostCacheAttack is a test that passes only if the host's build cache,
// mounted in the sandbox, refuses every write: a new file, a new
// directory, and an existing entry opened for writing.
const hostCacheAttack = `package a

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCannotWriteHostCache(t *testing.T) {
	const d = "/hostcache/go-build"
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("the host cache is not visible at %s: %v", d, err)
	}
	if err := os.WriteFile(filepath.Join(d, "poisoned-by-test"), []byte("x"), 0o644); err == nil {
		t.Errorf("wrote into %s", d)
	}
	if err := os.Mkdir(filepath.Join(d, "poisoned-dir"), 0o755); err == nil {
		t.Errorf("made a directory in %s", d)
	}
	entries, _ := filepath.Glob(filepath.Join(d, "*", "*-a"))
	if len(entries) == 0 {
		t.Fatalf("no entries in %s", d)
	}
	for _, e := range entries[:min(len(entries), 20)] {
		if f, err := os.OpenFile(e, os.O_WRONLY, 0); err == nil {
			f.Close()
			t.Errorf("opened %s for writing", e)
		}
	}
}
`

// TestHostGoCacheLayerInDockerSandbox: with a warm host cache (a real
// `go test` on the host filled it) and an empty project cache, the first
// test.run in a real L2 sandbox (a Docker container, a bwrap jail) takes what the host already compiled
// from the host cache (copied into the project's cache, never built
// again), what is new lands in the project's cache, a test trying to
// write the host cache fails to, leaving it exactly as it was, and the
// second run goes without the cache program.
func TestHostGoCacheLayerInDockerSandbox(t *testing.T) {
	for _, sb := range []string{"docker", "bwrap"} {
		t.Run(sb, func(t *testing.T) {
			if _, err := sandbox.BwrapUsable(); sb == "bwrap" && err != nil && os.Getenv("FLUFFY_REQUIRE_JAIL") == "" {
				t.Skipf("bubblewrap is not usable here: %v", err)
			}
			hostCacheLayer(t, sb)
		})
	}
}

func hostCacheLayer(t *testing.T, sb string) {
	t.Setenv("PATH", sandboxPath(t))
	ws, lower := t.TempDir(), t.TempDir()
	for _, d := range []string{ws, lower} {
		_ = os.Chmod(d, 0o755)
	}
	writeTree(t, ws, map[string]string{
		"go.mod":      "module example.com/attack\n\ngo 1.22\n",
		"a.go":        "package a\n\nimport \"strconv\"\n\nfunc Itoa(i int) string { return strconv.Itoa(i) }\n",
		"a_test.go":   hostCacheAttack,
		"b/b.go":      "package b\n\nimport \"encoding/json\"\n\nfunc M(v any) ([]byte, error) { return json.Marshal(v) }\n",
		"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestM(t *testing.T) {\n\tif b, err := M(1); err != nil || string(b) != \"1\" {\n\t\tt.Fatal(string(b), err)\n\t}\n}\n",
	})
	// The host user's own run, with the settings test.run uses.
	host := exec.Command("go", "test", "-count=1", "./...")
	host.Dir = ws
	// Only what test.run sets: a GOAMD64 or GOFLAGS of the caller's
	// environment would change every action ID.
	host.Env = []string{"PATH=" + sandboxPath(t), "HOME=" + t.TempDir(), "GOCACHE=" + lower, "CGO_ENABLED=0", "GOFLAGS=-mod=mod",
		"GOPROXY=off", "GOTOOLCHAIN=local", "GOENV=off", "GOTELEMETRY=off"}
	if out, err := host.CombinedOutput(); err == nil || !strings.Contains(string(out), "no entries") && !strings.Contains(string(out), "not visible") {
		// On the host the path does not exist: the attack test fails
		// there, which is expected; anything else is a broken fixture.
		t.Fatalf("host go test: %v\n%s", err, out)
	}
	filepath.Walk(lower, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	before := cacheSnapshot(t, lower)
	lowerIDs := cacheIDs(t, lower)
	e := kerneltest.Start(t, ws, kerneltest.Options{HostGoCache: lower, Sandbox: sb}, pluginPkg)
	res := e.Call(t, "tool-test", "test.run", "first", `{}`)
	if !res.OK {
		t.Fatalf("test.run: %+v", res.Err)
	}
	r, err := testrun.Decode(res.Output)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != testrun.Green || r.Counts.Passed != 2 {
		t.Fatalf("status %s (%d passed), want green with 2: %s\n%s", r.Status, r.Counts.Passed, r.Summary, r.Output)
	}
	sameSnapshot(t, "the host cache", before, cacheSnapshot(t, lower))
	upper := filepath.Join(kernel.BuildCacheDir(e.Home, ws), "go-build")
	upperIDs := cacheIDs(t, upper)
	if len(upperIDs) == 0 {
		t.Fatalf("nothing was written to the project's cache %s", upper)
	}
	// The standard library (strconv, encoding/json, testing and their
	// imports) has the same action IDs in both. Taken from the host
	// cache, an entry is copied into the project's byte for byte (the
	// host's timestamp included); built again, it would carry this
	// run's time.
	var copied, again int
	for id := range upperIDs {
		if !lowerIDs[id] {
			continue
		}
		a, _ := os.ReadFile(filepath.Join(upper, id[:2], id+"-a"))
		b, _ := os.ReadFile(filepath.Join(lower, id[:2], id+"-a"))
		if string(a) == string(b) {
			copied++
		} else {
			again++
		}
	}
	if again > 0 || copied == 0 {
		t.Errorf("of the project cache's %d entries, %d were built again though the host cache had them, %d copied from it", len(upperIDs), again, copied)
	}
	// The second run needs no cache program: the marker says the
	// project's cache has what the first took from the host.
	markers, _ := filepath.Glob(filepath.Join(kernel.BuildCacheDir(e.Home, ws), "go-layered", "*"))
	if len(markers) != 1 {
		t.Errorf("layer markers %v, want one", markers)
	}
	if res := e.Call(t, "tool-test", "test.run", "second", `{}`); !res.OK {
		t.Fatalf("second test.run: %+v", res.Err)
	} else if r, err := testrun.Decode(res.Output); err != nil || r.Status != testrun.Green {
		t.Fatalf("second test.run: %v %+v", err, r)
	}
	sameSnapshot(t, "the host cache", before, cacheSnapshot(t, lower))
	t.Logf("first run %d ms; the project's cache has %d entries (%d copied from the host's %d)", r.DurationMS, len(upperIDs), copied, len(lowerIDs))
}

// cacheIDs are the action IDs of dir's entries.
func cacheIDs(t *testing.T, dir string) map[string]bool {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*", "*-a"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, p := range m {
		ids[strings.TrimSuffix(filepath.Base(p), "-a")] = true
	}
	return ids
}
