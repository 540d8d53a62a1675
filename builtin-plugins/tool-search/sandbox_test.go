package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
)

const pluginPkg = "builtin-plugins/tool-search"

// TestSearchInDockerSandbox runs both tools inside a real L2 container
// through the kernel: same answers as in process, symlinks still not
// followed, and the workspace mounted read-only.
func TestSearchInDockerSandbox(t *testing.T) {
	env, _ := newEnv(t)
	e := kerneltest.Start(t, env.Workspace, kerneltest.Options{}, pluginPkg)
	r := e.Call(t, "tool-search", "search.grep", "op1", `{"pattern":"hello","ignore_case":true,"glob":"*.go"}`)
	g := grepOut(t, r)
	want := []string{"main.go:4:\tprintln(\"hello\")", "util/deep/x.go:2:var hello = 1", "util/util.go:3:// Hello says hello.", "util/util.go:4:func Hello() string { return \"Hello\" }"}
	if !slices.Equal(g.Matches, want) {
		t.Fatalf("grep in sandbox:\n got %q\nwant %q", g.Matches, want)
	}
	if g := grepOut(t, e.Call(t, "tool-search", "search.grep", "op2", `{"pattern":"secret"}`)); len(g.Matches) != 0 {
		t.Fatalf("followed a symlink out of the project: %q", g.Matches)
	}
	gl := globOut(t, e.Call(t, "tool-search", "search.glob", "op3", `{"pattern":"*.log"}`))
	if !slices.Equal(gl.Paths, []string{"keep.log", "util/important.log"}) {
		t.Fatalf("glob in sandbox: %q", gl.Paths)
	}
	if r := e.Call(t, "tool-search", "search.grep", "op4", `{"pattern":"x","path":"../"}`); r.OK || r.Err.Code != "FS_PATH_ESCAPES" {
		t.Fatalf("escape in sandbox: %+v", r)
	}
}

// makeTree writes a deterministic source tree of n files (100 per
// directory, ~2 KiB each) under dir; every 50th file holds a NEEDLE line.
func makeTree(tb testing.TB, dir string, n int) {
	tb.Helper()
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.Reset()
		fmt.Fprintf(&sb, "package p%d\n\nimport \"fmt\"\n\n", i/100)
		for j := 0; j < 12; j++ {
			fmt.Fprintf(&sb, "// Func%d_%d formats its argument for file %d.\nfunc Func%d_%d(x int) string {\n\treturn fmt.Sprintf(\"%%d-%d\", x)\n}\n\n", i, j, i, i, j, j)
		}
		if i%50 == 0 {
			fmt.Fprintf(&sb, "var marker = \"NEEDLE %d\"\n", i)
		}
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d.go", i))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tb.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkGrep10k compares search.grep through the sandboxed plugin (one
// warm call through the kernel's supervisor into the L2 container) with
// `grep -rn` on the host over the same 10 000-file tree, interleaved in the
// same run. The target is ratio ≤ 2.
func BenchmarkGrep10k(b *testing.B) {
	ws, err := os.MkdirTemp("", "fluffy-grep-bench")
	if err != nil {
		b.Fatal(err)
	}
	// Registered before the kernel's own cleanup, so it runs after it.
	b.Cleanup(func() { os.RemoveAll(ws) })
	os.Chmod(ws, 0o755)
	makeTree(b, filepath.Join(ws, "src"), 10000)
	e := kerneltest.Start(b, ws, kerneltest.Options{}, pluginPkg)
	for _, bc := range []struct{ name, pattern, grepFlag string }{
		{"literal", "NEEDLE", "-F"},
		{"regexp", `func Func[0-9]+0_11\(`, "-E"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			args, _ := json.Marshal(map[string]any{"pattern": bc.pattern, "path": "src", "max_results": 2000})
			host := func() []string {
				out, err := exec.Command("grep", "-rn", bc.grepFlag, bc.pattern, "src").Output()
				if err != nil {
					b.Fatal(err)
				}
				return strings.Split(strings.TrimSpace(string(out)), "\n")
			}
			// Same answers first (and warm both page cache and plugin).
			g := grepOut(b, e.Call(b, "tool-search", "search.grep", "warm", string(args)))
			oldWd, _ := os.Getwd()
			os.Chdir(ws)
			defer os.Chdir(oldWd)
			h := host()
			sort.Strings(h)
			got := slices.Clone(g.Matches)
			sort.Strings(got)
			if !slices.Equal(got, h) || g.Truncated {
				b.Fatalf("plugin and grep disagree: %d vs %d lines (truncated=%v)", len(got), len(h), g.Truncated)
			}
			var hostD, plugD []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				host()
				hostD = append(hostD, time.Since(t0))
				t0 = time.Now()
				if r := e.Call(b, "tool-search", "search.grep", fmt.Sprint("b", i), string(args)); !r.OK {
					b.Fatal(r.Err)
				}
				plugD = append(plugD, time.Since(t0))
			}
			b.StopTimer()
			hp, pp := median(hostD), median(plugD)
			b.ReportMetric(float64(hp.Microseconds()), "grep-rn-p50-µs")
			b.ReportMetric(float64(pp.Microseconds()), "plugin-p50-µs")
			b.ReportMetric(float64(pp)/float64(hp), "ratio")
			b.ReportMetric(float64(len(h)), "lines")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
