package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// floodManifest declares the fixture plugin's attack tools
// (internal/fixtures/tool-misbehave), as host/kernel's tests install it.
const floodManifest = `name: fixture
version: 1.0.0
kind: tool
description: "misbehaving plugin for the flood benchmark"
author: bench
entry: fixture
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
tags: [third_party]
tools:
  - name: fx.echo
    summary: "echo the arguments"
    parameters: {type: object}
  - name: fx.flood
    summary: "return an output of the given size"
    parameters: {type: object}
  - name: fx.hostile_error
    summary: "fail with an error whose why has the given size"
    parameters: {type: object}
  - name: fx.progress_flood
    summary: "report count progress events"
    parameters: {type: object}
  - name: fx.kernel_flood
    summary: "flood the kernel with callbacks"
    parameters: {type: object}
  - name: fx.fill_out
    summary: "write a large file to the call's /out"
    parameters: {type: object}
`

// floodSuite is the flood benchmark: a real in-process kernel with
// the fixture plugin in an L2 Docker container, each attack sent through
// the kernel's router. For each it records the outcome, the growth of
// this process's RSS (the kernel runs in it) from just before the attack
// to the peak sampled every 10 ms during it, and the growth of the disk
// used by $FLUFFY_HOME and the project's .fluffy.
func floodSuite(cfg config, progress func(string)) ([]Row, error) {
	tmp, err := os.MkdirTemp("", "fluffy-bench-flood")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	home, ws, pdir := filepath.Join(tmp, "home"), filepath.Join(tmp, "ws"), filepath.Join(tmp, "fixture")
	for _, d := range []string{home, ws, pdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hello\n"), 0o644)
	adapter := os.Getenv("FLUFFY_RUNTIME_ADAPTER")
	builds := [][2]string{{filepath.Join(pdir, "fixture"), "internal/fixtures/tool-misbehave"}}
	if adapter == "" {
		adapter = filepath.Join(tmp, "runtime-docker")
		builds = append(builds, [2]string{adapter, "builtin-plugins/runtime-docker"})
	}
	for _, b := range builds {
		progress("go build " + b[1])
		if err := testbin.IntoE(b[1], b[0]); err != nil {
			return nil, err
		}
	}
	sum, err := manifests.FileSHA256(filepath.Join(pdir, "fixture"))
	if err != nil {
		return nil, err
	}
	stamped, err := manifests.StampSHA256([]byte(floodManifest), sum)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(pdir, "plugin.yaml"), stamped, 0o644); err != nil {
		return nil, err
	}
	pol, err := policy.Load("flood-bench.yaml", []byte(string(policy.DefaultYAML())+`
  - name: fixture-tools
    match: { syscall: "fx.*", plugin: fixture }
    action: allow
`))
	if err != nil {
		return nil, err
	}
	env := map[string]string{"FLUFFY_RUNTIME_ADAPTER": adapter, "DOCKER_HOST": os.Getenv("DOCKER_HOST")}
	var progressLines atomic.Int64
	ctx := context.Background()
	k, err := kernel.Open(ctx, kernel.Options{Home: home, Workspace: ws, SessionID: "bench-flood",
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr}),
		Getenv: func(k string) string { return env[k] }, Policy: policy.NewEngine(pol, policy.Options{}),
		Progress: func(string) { progressLines.Add(1) }, StartTimeout: 2 * time.Minute})
	if err != nil {
		return nil, err
	}
	defer k.Close()
	if _, err := k.Registry.Install(ctx, pdir, registry.InstallOptions{Yes: true}); err != nil {
		return nil, err
	}
	spec, err := k.Registry.Runnable("fixture")
	if err != nil {
		return nil, err
	}
	if err := k.Plugins.Add(spec); err != nil {
		return nil, err
	}
	sess := &router.Session{ID: "flood", Mode: "explore", Caller: "user"}
	// Warm: the container start is not part of any attack.
	if r := k.Router.Call(ctx, sess, router.Call{Plugin: "fixture", Tool: "fx.echo", Args: json.RawMessage(`{"warm":1}`)}); r.Err != nil {
		return nil, fmt.Errorf("warm-up call: %v", r.Err)
	}
	disk := func() int64 { return duBytes(home) + duBytes(filepath.Join(ws, ".fluffy")) }

	var rows []Row
	for _, a := range []struct{ label, tool, args string }{
		{"baseline: one small fx.echo call", "fx.echo", `{"hello":"world"}`},
		{"oversized tool output (fx.flood 200 MiB)", "fx.flood", fmt.Sprintf(`{"bytes":%d}`, 200<<20)},
		{"oversized error why (fx.hostile_error 100 MiB)", "fx.hostile_error", fmt.Sprintf(`{"bytes":%d}`, 100<<20)},
		{"progress flood (fx.progress_flood 1e5 events of 100 B)", "fx.progress_flood", `{"count":100000,"bytes":100}`},
		{"progress flood (fx.progress_flood 1e6 events of 100 B)", "fx.progress_flood", `{"count":1000000,"bytes":100}`},
		{"callback flood (fx.kernel_flood 500 ReadFile, 60 KB paths)", "fx.kernel_flood", `{"count":500,"path_bytes":60000}`},
		{"callback flood (fx.kernel_flood 2000 ReadFile, 60 KB paths)", "fx.kernel_flood", `{"count":2000,"path_bytes":60000}`},
		{"large /out write (fx.fill_out 4 GiB)", "fx.fill_out", fmt.Sprintf(`{"bytes":%d}`, int64(4)<<30)},
	} {
		progress(a.label)
		runtime.GC()
		debug.FreeOSMemory()
		_ = k.Audit.Flush()
		d0, rss0 := disk(), rssBytes()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap0 := int64(ms.HeapAlloc)
		var peak, diskPeak, livePeak atomic.Int64
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
		metrics.Read(live)
		live0, goal0 := int64(live[0].Value.Uint64()), int64(live[1].Value.Uint64())
		livePeak.Store(live0)
		gcs0 := ms.NumGC
		peak.Store(rss0)
		diskPeak.Store(d0)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-t.C:
					if r := rssBytes(); r > peak.Load() {
						peak.Store(r)
					}
					metrics.Read(live)
					if v := int64(live[0].Value.Uint64()); v > livePeak.Load() {
						livePeak.Store(v)
					}
					if i%10 == 0 { // the disk every 100 ms
						if d := disk(); d > diskPeak.Load() {
							diskPeak.Store(d)
						}
					}
				}
			}
		}()
		var events atomic.Int64
		cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		t0 := time.Now()
		res := k.Router.Call(cctx, sess, router.Call{Plugin: "fixture", Tool: a.tool, Args: json.RawMessage(a.args),
			Progress: func(tool.Progress) { events.Add(1) }})
		el := time.Since(t0)
		cancel()
		close(stop)
		wg.Wait()
		if r := rssBytes(); r > peak.Load() {
			peak.Store(r)
		}
		_ = k.Audit.Flush()
		grew := disk() - d0
		runtime.GC()
		runtime.ReadMemStats(&ms)
		retained := int64(ms.HeapAlloc) - heap0
		outcome := "OK"
		if res.Err != nil {
			outcome = res.Err.Code
		}
		detail := fmt.Sprintf("%s; %s; output %d B", outcome, el.Round(time.Millisecond), len(res.Output))
		if a.tool == "fx.progress_flood" {
			detail += fmt.Sprintf("; %d progress events delivered", events.Load())
		}
		if a.tool == "fx.kernel_flood" && res.OK {
			detail += "; codes " + strings.ReplaceAll(string(res.Output), "|", "/")
		}
		if res.Err != nil {
			why := res.Err.Why
			if len(why) > 120 {
				why = why[:120] + "..."
			}
			detail += fmt.Sprintf("; error text %d B: %q", len(res.Err.What)+len(res.Err.Why)+len(res.Err.Fix), why)
		}
		detail += fmt.Sprintf("; RSS before %.0f MiB, Go heap before %.0f MiB (GC goal %.0f MiB); %d GCs during, peak live heap at them %+.1f MiB; live heap after GC %+.1f MiB; disk peak during %+.0f KiB",
			float64(rss0)/(1<<20), float64(heap0)/(1<<20), float64(goal0)/(1<<20), ms.NumGC-gcs0-1, float64(livePeak.Load()-live0)/(1<<20), float64(retained)/(1<<20), float64(diskPeak.Load()-d0)/(1<<10))
		progress("  " + detail)
		mib := func(b int64) float64 { return float64(b) / (1 << 20) }
		kib := func(b int64) float64 { return float64(b) / (1 << 10) }
		rr := Row{Suite: "flood", Name: "kernel RSS growth, peak - before: " + a.label + " [" + detail + "]", Unit: "MiB", N: 1}
		rr.P50, rr.P90, rr.P99 = mib(peak.Load()-rss0), mib(peak.Load()-rss0), mib(peak.Load()-rss0)
		dr := Row{Suite: "flood", Name: "disk growth of $FLUFFY_HOME + .fluffy: " + a.label, Unit: "KiB", N: 1}
		dr.P50, dr.P90, dr.P99 = kib(grew), kib(grew), kib(grew)
		if len(rows) > 0 {
			rr.Baseline, dr.Baseline = rows[0].Name, rows[1].Name
		}
		rows = append(rows, rr, dr)
	}
	return rows, nil
}

// rssBytes is this process's resident set (VmRSS of /proc/self/status).
func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

// duBytes is the disk space allocated to the files under dir, as du counts it.
func duBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
