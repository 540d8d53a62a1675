package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// BenchmarkFirstTestRun measures a project's first test.run (fresh
// FLUFFY_HOME: the project's build cache is empty) and its warm runs in
// the L2 sandbox, with the host's Go build cache layered under the
// project's ("layered") and without it ("cold": the behaviour before),
// beside the host's own `go test` with the user's warm cache and with an
// empty one. Projects: examples/parseconfig (standard library only) and
// testdata/depsmod (go-hclog and yaml.v3 from the host's module cache).
//
// Metrics, per project: host-warm-ms and host-cold-ms (GOCACHE empty);
// for each mode <mode>-first-ms (the whole call, sandbox start
// included), <mode>-first-inside-ms (go test as the plugin timed it: the
// call without the sandbox start), <mode>-warm-ms and
// <mode>-warm-inside-ms (medians of five warm calls, interleaved with
// five host runs whose median is host-warm-ms); first-over-host-warm
// (layered first-inside / host warm, target ≤ 3) and warm-over-host-warm
// (layered warm / host warm, target ≤ 1.3). The sandbox has the
// code-executor template's one CPU; the host runs have all of them.
// One iteration takes minutes: run it with -benchtime=1x.
func BenchmarkFirstTestRun(b *testing.B) {
	_, self, _, _ := runtime.Caller(0)
	here := filepath.Dir(self)
	projects := []struct{ name, src string }{
		{"parseconfig", filepath.Join(here, "..", "..", "examples", "parseconfig")},
		{"depsmod", filepath.Join(here, "testdata", "depsmod")},
	}
	for _, p := range projects {
		b.Run(p.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchFirstRun(b, p.src)
			}
		})
	}
}

func benchFirstRun(b *testing.B, src string) {
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	hostWS := copyProject(b, src)
	host := func(env ...string) time.Duration {
		cmd := exec.Command("go", "test", "-count=1", "./...")
		cmd.Dir = hostWS
		cmd.Env = append(os.Environ(), append([]string{"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off"}, env...)...)
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("host go test: %v\n%s", err, out)
		}
		return time.Since(t0)
	}
	host() // the user's cache holds this project's build, as after their own run
	hostCold := host("GOCACHE=" + b.TempDir())
	b.ReportMetric(ms(hostCold), "host-cold-ms")
	type sandbox struct {
		name           string
		call           func(op string) (total, inside time.Duration)
		warm, warmIn   []time.Duration
		first, firstIn time.Duration
	}
	var boxes []*sandbox
	for _, mode := range []struct{ name, hostCache string }{{"layered", ""}, {"cold", "off"}} {
		e := kerneltest.Start(b, copyProject(b, src), kerneltest.Options{HostGoCache: mode.hostCache}, pluginPkg)
		sb := &sandbox{name: mode.name, call: func(op string) (total, inside time.Duration) {
			t0 := time.Now()
			res := e.Call(b, "tool-test", "test.run", op, `{"timeout_seconds":300}`)
			total = time.Since(t0)
			if !res.OK {
				b.Fatalf("test.run: %+v", res.Err)
			}
			r, err := testrun.Decode(res.Output)
			if err != nil || r.Status != testrun.Green {
				b.Fatalf("test.run: %v %s", err, textsafe.Cap(string(res.Output), 2000))
			}
			return total, r.Duration()
		}}
		sb.first, sb.firstIn = sb.call("first")
		boxes = append(boxes, sb)
	}
	// Warm runs interleaved with the host's, so load from elsewhere on
	// the machine falls on all of them alike.
	var hostWarm []time.Duration
	for i := range 5 {
		hostWarm = append(hostWarm, host())
		for _, sb := range boxes {
			d, in := sb.call(fmt.Sprint("warm", i))
			sb.warm, sb.warmIn = append(sb.warm, d), append(sb.warmIn, in)
		}
	}
	hw := med(hostWarm)
	b.ReportMetric(ms(hw), "host-warm-ms")
	for _, sb := range boxes {
		b.ReportMetric(ms(sb.first), sb.name+"-first-ms")
		b.ReportMetric(ms(sb.firstIn), sb.name+"-first-inside-ms")
		b.ReportMetric(ms(med(sb.warm)), sb.name+"-warm-ms")
		b.ReportMetric(ms(med(sb.warmIn)), sb.name+"-warm-inside-ms")
		b.Logf("%s: first %v (go test inside %v, sandbox start and call %v); warm %v (inside %v)", sb.name, sb.first.Round(time.Millisecond),
			sb.firstIn.Round(time.Millisecond), (sb.first - sb.firstIn).Round(time.Millisecond), sb.warm, sb.warmIn)
	}
	b.ReportMetric(float64(boxes[0].firstIn)/float64(hw), "first-over-host-warm")
	b.ReportMetric(float64(med(boxes[0].warm))/float64(hw), "warm-over-host-warm")
	b.ReportMetric(0, "ns/op")
	b.Logf("host: warm %v (runs %v), cold %v", hw.Round(time.Millisecond), hostWarm, hostCold.Round(time.Millisecond))
}

// copyProject copies the module at src into a fresh directory the
// sandbox user can read.
func copyProject(b *testing.B, src string) string {
	b.Helper()
	dst := b.TempDir()
	_ = os.Chmod(dst, 0o755)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		b.Fatal(err)
	}
	return dst
}
