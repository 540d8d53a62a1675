package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// BenchmarkTestRunVsHost runs the tests of a real package (a copy of
// fluffy's lib/patch as its own module) with test.run in the L2
// sandbox through the kernel, and with `go test` on the host, interleaved
// in the same run, both warm (one run each first). The target is
// ratio ≤ 1.3. The sandbox has the code-executor template's one CPU, so
// `go test` pinned to one CPU (taskset) is measured too: ratio-1cpu is
// the sandbox's own overhead. Each benchmark iteration is at least five
// rounds (the first call builds a cold cache: minutes), so run it with
// -benchtime=1x.
func BenchmarkTestRunVsHost(b *testing.B) {
	ws, err := os.MkdirTemp("", "fluffy-testrun-bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(ws) })
	_ = os.Chmod(ws, 0o755)
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "..", "pluginsdk", "patch")
	files, _ := filepath.Glob(filepath.Join(src, "*.go"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, filepath.Base(f)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "go.mod"), []byte("module example.com/patch\n\ngo 1.22\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	e := kerneltest.Start(b, ws, kerneltest.Options{}, pluginPkg)
	host := func(pin bool) {
		argv := []string{"go", "test", "-count=1", "./..."}
		if pin {
			argv = append([]string{"taskset", "-c", "0"}, argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("host go test: %v\n%s", err, out)
		}
	}
	var tests int
	var inside []time.Duration // the run as the plugin timed it
	sandboxed := func(op string) {
		res := e.Call(b, "tool-test", "test.run", op, `{}`)
		if !res.OK {
			b.Fatalf("test.run: %+v", res.Err)
		}
		r, err := testrun.Decode(res.Output)
		if err != nil || r.Status != testrun.Green {
			b.Fatalf("test.run: %v %s", err, textsafe.Cap(string(res.Output), 2000))
		}
		tests = r.Counts.Passed
		inside = append(inside, r.Duration())
	}
	t0 := time.Now()
	sandboxed("warm")
	b.Logf("first (cold cache) test.run: %s", time.Since(t0).Round(time.Millisecond))
	host(false)
	_, pinErr := exec.LookPath("taskset")
	var hostD, pinD, plugD []time.Duration
	b.ResetTimer()
	for i := 0; i < max(b.N, 5); i++ {
		t0 := time.Now()
		host(false)
		hostD = append(hostD, time.Since(t0))
		if pinErr == nil {
			t0 = time.Now()
			host(true)
			pinD = append(pinD, time.Since(t0))
		}
		t0 = time.Now()
		sandboxed(fmt.Sprint("b", i))
		plugD = append(plugD, time.Since(t0))
	}
	b.StopTimer()
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	hp, pp := med(hostD), med(plugD)
	b.ReportMetric(float64(hp.Milliseconds()), "host-go-test-p50-ms")
	b.ReportMetric(float64(pp.Milliseconds()), "test.run-p50-ms")
	b.ReportMetric(float64(pp)/float64(hp), "ratio")
	b.ReportMetric(float64(med(inside[1:]).Milliseconds()), "in-plugin-p50-ms")
	if len(pinD) > 0 {
		b.ReportMetric(float64(med(pinD).Milliseconds()), "host-1cpu-p50-ms")
		b.ReportMetric(float64(pp)/float64(med(pinD)), "ratio-1cpu")
	}
	b.ReportMetric(float64(tests), "tests")
	b.ReportMetric(0, "ns/op")
	b.Logf("host %v; host 1 CPU %v; sandbox %v", strings.Trim(fmt.Sprint(hostD), "[]"), strings.Trim(fmt.Sprint(pinD), "[]"), strings.Trim(fmt.Sprint(plugD), "[]"))
}
