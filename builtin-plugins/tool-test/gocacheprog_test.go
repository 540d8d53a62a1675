package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
)

// cacheSnapshot is every file under dir with its size, mode, mtime and
// content hash: a change of any of them shows.
func cacheSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sum := ""
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		snap[p] = fmt.Sprintf("%d %v %d %s", fi.Size(), fi.Mode(), fi.ModTime().UnixNano(), sum)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, v := range after {
		if before[p] != v {
			t.Errorf("%s changed: %s (%q → %q)", what, p, before[p], v)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("%s lost %s", what, p)
		}
	}
}

// TestGoCacheProgLayers builds a real module with the go command and the
// plugin binary as its GOCACHEPROG: with the host-like cache (lower)
// warm and the project's (upper) empty, only the package that changed is
// compiled, its result lands in upper, and lower is left exactly as it
// was.
func TestGoCacheProgLayers(t *testing.T) {
	t.Setenv("PATH", sandboxPath(t))
	bin := kerneltest.Build(t, pluginPkg)
	ws, lower, upper := t.TempDir(), t.TempDir(), t.TempDir()
	writeTree(t, ws, map[string]string{
		"go.mod":    "module example.com/layers\n\ngo 1.22\n",
		"a.go":      "package layers\n\nimport \"strconv\"\n\nfunc Itoa(i int) string { return strconv.Itoa(i) }\n",
		"b/b.go":    "package b\n\nimport \"strings\"\n\nfunc Up(s string) string { return strings.ToUpper(s) }\n",
		"b/b2.go":   "package b\n",
		"c/main.go": "package main\n\nimport (\n\t\"example.com/layers\"\n\t\"example.com/layers/b\"\n)\n\nfunc main() { println(b.Up(layers.Itoa(1))) }\n",
	})
	build := func(env ...string) string {
		t.Helper()
		cmd := exec.Command("go", "build", "-x", "-o", t.TempDir()+"/", "./...")
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), append([]string{"CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOENV=off"}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return string(out)
	}
	// The host's cache: warmed by a plain build, then never written.
	build("GOCACHE=" + lower)
	before := cacheSnapshot(t, lower)
	writeTree(t, ws, map[string]string{"b/b2.go": "package b\n\nfunc Down(s string) string { return s }\n"})
	prog := strings.Join([]string{bin, cacheProgArg, lower, upper}, " ")
	out := build("GOCACHE="+upper, "GOCACHEPROG="+prog)
	var compiled []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "/compile ") && strings.Contains(l, " -p ") {
			f := strings.Fields(l[strings.Index(l, " -p "):])
			compiled = append(compiled, f[1])
		}
	}
	// b changed; main imports b, so it is compiled again too.
	if strings.Join(compiled, ",") != "example.com/layers/b,main" {
		t.Errorf("compiled %v, want only the changed package and its importer (the rest from the lower cache)", compiled)
	}
	sameSnapshot(t, "the lower cache", before, cacheSnapshot(t, lower))
	entries, _ := filepath.Glob(filepath.Join(upper, "*", "*-a"))
	if len(entries) == 0 {
		t.Errorf("nothing was written to the upper cache")
	}
	// A second build is all hits: nothing compiled.
	if out := build("GOCACHE="+upper, "GOCACHEPROG="+prog); strings.Contains(out, "/compile ") {
		t.Errorf("warm build compiled again:\n%s", out)
	}
	sameSnapshot(t, "the lower cache", before, cacheSnapshot(t, lower))
}

// TestGoCacheProgProtocol drives the helper over its pipes as the go
// command does: entries in upper, in lower, broken ones, and puts.
func TestGoCacheProgProtocol(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	id := func(s string) []byte { h := sha256.Sum256([]byte("action " + s)); return h[:] }
	store := func(dir, name, body string, size int) []byte {
		out := sha256.Sum256([]byte(body))
		if err := writeAtomic(cacheFile(dir, out[:], "d"), []byte(body)); err != nil {
			t.Fatal(err)
		}
		entry := fmt.Sprintf("v1 %x %x %20d %20d\n", id(name), out[:], size, 12345)
		if err := writeAtomic(cacheFile(dir, id(name), "a"), []byte(entry)); err != nil {
			t.Fatal(err)
		}
		return out[:]
	}
	inLower := store(lower, "lower", "from lower", 10)
	inUpper := store(upper, "both", "from upper", 10)
	store(lower, "both", "lower copy", 10)
	store(lower, "short", "truncated", 99)
	if err := writeAtomic(cacheFile(lower, id("garbled"), "a"), []byte("v1 nonsense\n")); err != nil {
		t.Fatal(err)
	}
	body := []byte("new output")
	bodyID := sha256.Sum256(body)
	bodyJSON, _ := json.Marshal(body)
	cases := []struct {
		name     string
		req      cacheRequest
		body     []byte
		miss     bool
		err      string
		outputID []byte
		content  string
	}{
		{name: "lower hit", req: cacheRequest{Command: "get", ActionID: id("lower")}, outputID: inLower, content: "from lower"},
		{name: "upper wins", req: cacheRequest{Command: "get", ActionID: id("both")}, outputID: inUpper, content: "from upper"},
		{name: "miss", req: cacheRequest{Command: "get", ActionID: id("absent")}, miss: true},
		{name: "size mismatch is a miss", req: cacheRequest{Command: "get", ActionID: id("short")}, miss: true},
		{name: "garbled entry is a miss", req: cacheRequest{Command: "get", ActionID: id("garbled")}, miss: true},
		{name: "bad action id", req: cacheRequest{Command: "get", ActionID: []byte("x")}, err: "action ID"},
		{name: "put", req: cacheRequest{Command: "put", ActionID: id("new"), OutputID: bodyID[:], BodySize: int64(len(body))}, body: bodyJSON, content: "new output"},
		{name: "get after put", req: cacheRequest{Command: "get", ActionID: id("new")}, outputID: bodyID[:], content: "new output"},
		{name: "put with a lying output id", req: cacheRequest{Command: "put", ActionID: id("lie"), OutputID: inLower, BodySize: int64(len(body))}, body: bodyJSON, err: "does not hash"},
		{name: "lie not stored", req: cacheRequest{Command: "get", ActionID: id("lie")}, miss: true},
	}
	var in bytes.Buffer
	for i, c := range cases {
		c.req.ID = int64(i + 1)
		b, _ := json.Marshal(c.req)
		in.Write(append(b, '\n', '\n'))
		if c.body != nil {
			in.Write(append(c.body, '\n'))
		}
	}
	in.WriteString(`{"ID":999,"Command":"close"}` + "\n")
	before := cacheSnapshot(t, lower)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- layeredCache{lower: lower, upper: upper}.serve(&in, pw); pw.Close() }()
	sc := bufio.NewScanner(pr)
	sc.Buffer(nil, 1<<20)
	var got []cacheResponse
	for sc.Scan() {
		var r cacheResponse
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("response %q: %v", sc.Text(), err)
		}
		got = append(got, r)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cases)+2 || strings.Join(got[0].KnownCommands, ",") != "get,put,close" || got[len(got)-1].ID != 999 {
		t.Fatalf("responses %+v", got)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := got[i+1]
			if r.ID != int64(i+1) {
				t.Fatalf("response ID %d, want %d", r.ID, i+1)
			}
			if c.err != "" {
				if !strings.Contains(r.Err, c.err) {
					t.Fatalf("err %q, want %q", r.Err, c.err)
				}
				return
			}
			if r.Err != "" || r.Miss != c.miss {
				t.Fatalf("err %q miss %v, want miss %v", r.Err, r.Miss, c.miss)
			}
			if c.miss {
				return
			}
			if c.outputID != nil && !bytes.Equal(r.OutputID, c.outputID) {
				t.Errorf("output ID %x, want %x", r.OutputID, c.outputID)
			}
			b, err := os.ReadFile(r.DiskPath)
			if err != nil || string(b) != c.content {
				t.Errorf("disk path %s holds %q (%v), want %q", r.DiskPath, b, err, c.content)
			}
			if c.req.Command == "put" && !strings.HasPrefix(r.DiskPath, upper+"/") {
				t.Errorf("put landed at %s, outside the upper cache", r.DiskPath)
			}
		})
	}
	sameSnapshot(t, "the lower cache", before, cacheSnapshot(t, lower))
}

// TestGoCacheProgTrims: at close the helper trims the project's cache as
// the go command would (entries unused for five days), at most once a
// day, and never touches the host's.
func TestGoCacheProgTrims(t *testing.T) {
	lower, upper := t.TempDir(), t.TempDir()
	old := time.Now().Add(-6 * 24 * time.Hour)
	put := func(dir, name string, mtime time.Time) string {
		p := filepath.Join(dir, "ab", name)
		if err := writeAtomic(p, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale, fresh, other := put(upper, "ab01-a", old), put(upper, "ab02-d", time.Now()), put(upper, "ab03-x", old)
	lowerStale := put(lower, "ab01-a", old)
	close := func() {
		in := strings.NewReader(`{"ID":1,"Command":"close"}` + "\n")
		if err := (layeredCache{lower: lower, upper: upper}).serve(in, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	close()
	for _, c := range []struct {
		path string
		want bool
	}{{stale, false}, {fresh, true}, {other, true}, {lowerStale, true}} {
		if _, err := os.Stat(c.path); (err == nil) != c.want {
			t.Errorf("%s: exists %v, want %v", c.path, err == nil, c.want)
		}
	}
	// Within a day of the last trim nothing is removed.
	again := put(upper, "ab04-a", old)
	close()
	if _, err := os.Stat(again); err != nil {
		t.Errorf("trimmed twice within a day: %v", err)
	}
}

// TestGoCacheProgOnlyUntilCopiedUp: a module is layered until a layered
// run closed with its marker; a changed go.mod or go.sum layers it again.
func TestGoCacheProgOnlyUntilCopiedUp(t *testing.T) {
	lower, cache, ws := t.TempDir(), t.TempDir(), t.TempDir()
	t.Setenv(envHostGoCache, lower)
	writeTree(t, ws, map[string]string{"go.mod": "module example.com/m\n\ngo 1.22\n", "sub/x.go": "package sub\n"})
	j := &job{ws: ws, target: "sub", cache: cache, self: "/plugin/tool-test", logger: hclog.NewNullLogger()}
	upper := filepath.Join(cache, "go-build")
	closeLayered := func(prog string) {
		t.Helper()
		f := strings.Fields(prog)
		if len(f) != 6 || f[1] != cacheProgArg || f[2] != lower || f[3] != upper {
			t.Fatalf("GOCACHEPROG %q", prog)
		}
		in := strings.NewReader(`{"ID":1,"Command":"close"}` + "\n")
		if err := (layeredCache{lower: lower, upper: upper, marker: f[4], key: f[5]}).serve(in, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name    string
		change  map[string]string
		layered bool
	}{
		{"first run", nil, true},
		{"after a layered run", nil, false},
		{"again", nil, false},
		{"go.sum appears", map[string]string{"go.sum": "example.com/dep v1.0.0 h1:x=\n"}, true},
		{"after that", nil, false},
		{"go.mod changes", map[string]string{"go.mod": "module example.com/m\n\ngo 1.23\n"}, true},
	}
	for _, s := range steps {
		writeTree(t, ws, s.change)
		prog := j.goCacheProg(upper)
		if (prog != "") != s.layered {
			t.Fatalf("%s: GOCACHEPROG %q, want layered %v", s.name, prog, s.layered)
		}
		if prog != "" {
			closeLayered(prog)
		}
	}
	// Without the kernel's cache (a cold run in scratch) every run is
	// layered: nothing outlives it to copy into.
	cold := &job{ws: ws, target: "sub", self: "/plugin/tool-test", logger: hclog.NewNullLogger()}
	if prog := cold.goCacheProg(t.TempDir()); len(strings.Fields(prog)) != 4 {
		t.Fatalf("scratch cache: %q", prog)
	}
	t.Setenv(envHostGoCache, "")
	if prog := j.goCacheProg(upper); prog != "" {
		t.Fatalf("no host cache, yet %q", prog)
	}
}
