package sandbox

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(ds[len(ds)*9/10].Microseconds()), "p90-µs")
	b.ReportMetric(0, "ns/op")
}

type benchLauncher struct {
	name string
	l    func(b *testing.B) launcher
}

func benchLaunchers() []benchLauncher {
	return []benchLauncher{
		{"subprocess", func(*testing.B) launcher { return Subprocess{} }},
		{"bwrap", func(b *testing.B) launcher {
			if _, err := BwrapUsable(); err != nil {
				b.Skipf("bwrap unusable: %v", err)
			}
			return &Bwrap{Lease: tenv.lease}
		}},
		{"docker", func(b *testing.B) launcher { needDocker(b); return tenv.containers }},
		{"runsc", func(b *testing.B) launcher {
			needRunsc(b)
			c, err := NewContainers(context.Background(), ContainersConfig{Runtime: tenv.rt, Lease: tenv.lease,
				OCIRuntimes: map[string]string{"code-executor": "runsc"}})
			if err != nil {
				b.Fatal(err)
			}
			return c
		}},
	}
}

// BenchmarkStartToReady measures launch → handshake → Configure → first
// answered call, per launcher, plus `docker run --rm` of the same image and
// binary from the CLI as the engine's own floor.
func BenchmarkStartToReady(b *testing.B) {
	for _, bl := range benchLaunchers() {
		b.Run(bl.name, func(b *testing.B) {
			l := bl.l(b)
			var ds []time.Duration
			for i := 0; i < b.N; i++ {
				spec := newSpec(b, "code-executor")
				start := time.Now()
				r, err := launchErr(l, spec)
				if err != nil {
					b.Fatal(err)
				}
				if err := r.tool.Health(context.Background()); err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(start))
				r.stop()
			}
			reportPercentiles(b, ds)
		})
	}
	b.Run("docker-cli-run-rm", func(b *testing.B) {
		needDocker(b)
		var ds []time.Duration
		for i := 0; i < b.N; i++ {
			start := time.Now()
			// Without go-plugin's cookie the fixture prints a notice and
			// exits 1: a full create/start/wait/remove cycle.
			cmd := exec.Command("docker", "run", "--rm", "--network", "none", "--read-only", "--user", "65532:65532",
				"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "-v", tenv.hostile+":/plugin/hostile:ro",
				tenv.containers.Image(), "/plugin/hostile")
			_ = cmd.Run()
			ds = append(ds, time.Since(start))
		}
		reportPercentiles(b, ds)
	})
}

// BenchmarkWarmRoundTrip measures one tool call into an already running
// plugin, per launcher.
func BenchmarkWarmRoundTrip(b *testing.B) {
	args, _ := json.Marshal(map[string]any{"text": "x"})
	for _, bl := range benchLaunchers() {
		b.Run(bl.name, func(b *testing.B) {
			l := bl.l(b)
			r, err := launchErr(l, newSpec(b, "code-executor"))
			if err != nil {
				b.Fatal(err)
			}
			defer r.stop()
			ctx := context.Background()
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				res, err := r.tool.Execute(ctx, tool.Call{ID: "b", Tool: "echo", Args: args}, nil)
				if err != nil || res.Err != nil {
					b.Fatal(err, res.Err)
				}
				ds = append(ds, time.Since(start))
			}
			b.StopTimer()
			reportPercentiles(b, ds)
		})
	}
}
