package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/scheduler"
)

// taskSuite measures the whole task: the scripted demo
// (examples/cassettes/parseconfig.jsonl, provider-replay) end to end in
// real sandboxes, its wall time split by the events' own timestamps, and
// the kernel's memory over a synthetic 50-turn session.
func taskSuite(cfg config, progress func(string)) ([]Row, error) {
	data, err := os.ReadFile("examples/cassettes/parseconfig.jsonl")
	if err != nil {
		return nil, fmt.Errorf("run the harness from the repository root: %w", err)
	}
	names := []string{"wall", "provider", "sandbox start", "test runs", "other tool calls", "commit (vcs-git)", "kernel overhead"}
	// Sample 1 runs on a fresh home and project path: cold sandboxes and a
	// cold build cache (the first test.run compiles the standard library).
	// Later samples reuse both paths (a fresh copy of the project, a new
	// kernel, cold sandboxes) and so find the project's build cache warm,
	// as a second task in the same project would.
	split := map[string][]time.Duration{}
	var shares []time.Duration // kernel overhead share, in units of 0.01 % (stored as ns for stats)
	var dirs *taskDirs
	var cold map[string]time.Duration
	var coldShare time.Duration
	defer func() {
		if dirs != nil {
			os.RemoveAll(dirs.ws)
			os.RemoveAll(dirs.home)
		}
	}()
	for i := range cfg.samples {
		progress(fmt.Sprintf("demo task %d/%d (new kernel, cold sandboxes, %s build cache)", i+1, cfg.samples, map[bool]string{true: "cold", false: "warm"}[i == 0]))
		env, err := openTaskEnv(cfg, data, 0, scheduler.Config{}, dirs)
		if err != nil {
			return nil, err
		}
		if dirs == nil {
			dirs = &taskDirs{home: env.home, ws: env.ws}
			env.keep = true
		}
		evs, done, wall, err := env.run("add error handling to parseConfig", "", nil)
		env.close()
		if err != nil {
			return nil, err
		}
		if done.Status != agent.StatusDone {
			return nil, fmt.Errorf("demo task ended %s: %s", done.Status, done.Reason)
		}
		for _, e := range evs {
			if e.Type == agent.EventToolResult && e.Tool != nil && e.Tool.DurationMS >= 1000 {
				progress(fmt.Sprintf("    slow call: %s (%s) %d ms %s", e.Tool.Name, e.Tool.Plugin, e.Tool.DurationMS, e.Tool.TestStatus))
			}
		}
		p, top := splitTask(evs, wall)
		p["wall"] = wall
		share := float64(p["kernel overhead"]) / float64(wall)
		if i == 0 {
			cold, coldShare = p, time.Duration(share*1e4)
		} else {
			for _, n := range names {
				split[n] = append(split[n], p[n])
			}
			shares = append(shares, time.Duration(share*1e4))
		}
		progress(fmt.Sprintf("  wall %v: provider %v, sandbox start %v, test runs %v, other tools %v, commit %v, kernel %v (%.1f %%)",
			wall.Round(time.Millisecond), p["provider"].Round(time.Millisecond), p["sandbox start"].Round(time.Millisecond),
			p["test runs"].Round(time.Millisecond), p["other tool calls"].Round(time.Millisecond), p["commit (vcs-git)"].Round(time.Millisecond),
			p["kernel overhead"].Round(time.Millisecond), share*100))
		progress("    largest kernel-only gaps between events: " + strings.Join(top, "; "))
	}
	var rows []Row
	add := func(label string, split map[string][]time.Duration, shares []time.Duration) {
		for _, n := range names {
			r := stats("task", "demo task"+label+": "+n, split[n], "ms")
			if n != "wall" {
				r.Baseline = "demo task" + label + ": wall"
			}
			rows = append(rows, r)
		}
		sr := stats("task", "demo task"+label+": kernel overhead share", shares, "ns")
		sr.Unit = "%"
		sr.P50, sr.P90, sr.P99 = sr.P50/100, sr.P90/100, sr.P99/100
		verdict(&sr, 5)
		rows = append(rows, sr)
	}
	one := map[string][]time.Duration{}
	for _, n := range names {
		one[n] = []time.Duration{cold[n]}
	}
	add(" (cold build cache)", one, []time.Duration{coldShare})
	if len(shares) > 0 {
		add(" (warm build cache)", split, shares)
	}

	rss, err := memorySuite(cfg, progress)
	if err != nil {
		return nil, err
	}
	return append(rows, rss...), nil
}

// splitTask attributes each millisecond of a task's wall time to one
// part, in this order of precedence: sandbox start, test runs, other tool
// calls, the commit (vcs-git), provider, kernel overhead (the rest). It also returns the
// largest kernel-only gaps between consecutive events, described.
//
//   - A tool call spans [result time - DurationMS, result time].
//   - A model turn (provider) spans from its first streamed event to its
//     usage event; the gap before it (building the request, the provider's
//     time to first event) is not counted as provider.
//   - Sandbox start: the first call of each tool plugin minus the median of
//     its later calls; for the provider, the gap before turn 1 minus the
//     median gap before the other turns.
func splitTask(evs []agent.Event, wall time.Duration) (map[string]time.Duration, []string) {
	if len(evs) == 0 {
		return map[string]time.Duration{}, nil
	}
	t0 := evs[0].Time
	for _, e := range evs {
		if e.Type == agent.EventTaskStarted {
			t0 = e.Time
			break
		}
	}
	end := t0.Add(wall)
	slots := make([]int8, int(wall/time.Millisecond)+1)
	const (
		kKernel int8 = iota
		kProvider
		kCommit
		kOther
		kTest
		kStart
	)
	mark := func(from, to time.Time, k int8) {
		a, b := int(from.Sub(t0)/time.Millisecond), int(to.Sub(t0)/time.Millisecond)
		a, b = max(a, 0), min(b, len(slots))
		for i := a; i < b; i++ {
			if slots[i] < k {
				slots[i] = k
			}
		}
	}
	// Model turns.
	type turn struct{ first, usage, prev time.Time }
	turns := map[int]*turn{}
	var order []int
	var last time.Time = t0
	for _, e := range evs {
		streamed := e.Type == agent.EventTextDelta || e.Type == agent.EventReasoningDelta || e.Type == agent.EventToolCallStart || e.Type == agent.EventUsage
		if streamed && e.Turn > 0 {
			t, ok := turns[e.Turn]
			if !ok {
				t = &turn{first: e.Time, prev: last}
				turns[e.Turn] = t
				order = append(order, e.Turn)
			}
			if e.Type == agent.EventUsage {
				t.usage = e.Time
			}
		}
		last = e.Time
	}
	var gaps []time.Duration
	for _, n := range order {
		t := turns[n]
		if !t.usage.IsZero() {
			mark(t.first, t.usage, kProvider)
		}
		if n != order[0] {
			gaps = append(gaps, t.first.Sub(t.prev))
		}
	}
	if len(order) > 0 {
		t := turns[order[0]]
		if cold := t.first.Sub(t.prev) - median(gaps); cold > 0 {
			mark(t.first.Add(-cold), t.first, kStart)
		}
	}
	// The commit: the kernel's call of vcs-git (its sandbox start and the
	// commit), between the "merged" and the "committed" notices; no tool
	// event covers it.
	var merged time.Time
	for _, e := range evs {
		if e.Type != agent.EventNotice {
			continue
		}
		if strings.HasPrefix(e.Text, "merged ") {
			merged = e.Time
		} else if strings.HasPrefix(e.Text, "committed ") && !merged.IsZero() {
			mark(merged, e.Time, kCommit)
		}
	}
	// Tool calls.
	type call struct {
		from, to time.Time
		plugin   string
		name     string
	}
	var calls []call
	for _, e := range evs {
		if e.Type != agent.EventToolResult || e.Tool == nil || e.Tool.DurationMS == 0 {
			continue
		}
		d := time.Duration(e.Tool.DurationMS) * time.Millisecond
		calls = append(calls, call{from: e.Time.Add(-d), to: e.Time, plugin: e.Tool.Plugin, name: e.Tool.Name})
	}
	firstOf := map[string]int{}
	warm := map[string][]time.Duration{}
	for i, c := range calls {
		if _, ok := firstOf[c.plugin]; !ok {
			firstOf[c.plugin] = i
			continue
		}
		warm[c.plugin+"\x00"+c.name] = append(warm[c.plugin+"\x00"+c.name], c.to.Sub(c.from))
	}
	for i, c := range calls {
		k := kOther
		if c.name == "test.run" {
			k = kTest
		}
		mark(c.from, c.to, k)
		if c.plugin != "" && c.plugin != "kernel" && firstOf[c.plugin] == i {
			if w, ok := warm[c.plugin+"\x00"+c.name]; ok {
				if cold := c.to.Sub(c.from) - median(w); cold > 0 {
					mark(c.from, c.from.Add(cold), kStart)
				}
			}
		}
	}
	_ = end
	// Where the kernel's share goes: the largest stretches of kernel-only
	// time between two consecutive events.
	type gap struct {
		ms   int
		what string
	}
	var gaps2 []gap
	desc := func(e agent.Event) string {
		if e.Tool != nil {
			return e.Type + " " + e.Tool.Name
		}
		if e.State != nil {
			return e.Type + " " + e.State.To
		}
		if e.Type == agent.EventNotice {
			return fmt.Sprintf("notice %q", textsafe.Cap(e.Text, 50))
		}
		return e.Type
	}
	for i := 1; i < len(evs); i++ {
		a, b := int(evs[i-1].Time.Sub(t0)/time.Millisecond), int(evs[i].Time.Sub(t0)/time.Millisecond)
		n := 0
		for j := max(a, 0); j < min(b, len(slots)); j++ {
			if slots[j] == kKernel {
				n++
			}
		}
		if n > 0 {
			gaps2 = append(gaps2, gap{n, desc(evs[i-1]) + " → " + desc(evs[i])})
		}
	}
	sort.Slice(gaps2, func(i, j int) bool { return gaps2[i].ms > gaps2[j].ms })
	var top []string
	for _, g := range gaps2[:min(len(gaps2), 6)] {
		top = append(top, fmt.Sprintf("%d ms %s", g.ms, g.what))
	}
	out := map[string]time.Duration{}
	label := map[int8]string{kKernel: "kernel overhead", kProvider: "provider", kCommit: "commit (vcs-git)", kOther: "other tool calls", kTest: "test runs", kStart: "sandbox start"}
	for _, k := range slots {
		out[label[k]] += time.Millisecond
	}
	return out, top
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// memorySuite runs a synthetic 50-turn session (each turn one fs.read of a
// project file; every 10th turn also writes a new file, or the futility
// check would stop a task that makes no change for 12 turns) in the
// harness's process, where the kernel runs, and reports VmRSS before,
// after and at peak (VmHWM), the peak Go heap (sampled every 5 calls) and
// the live heap after a GC at the end, with the kernel still open.
// It is part of the task suite and runs alone as the memory suite (a
// fresh process gives the cleanest before figure).
func memorySuite(cfg config, progress func(string)) ([]Row, error) {
	var calls [][]toolCall
	for i := range 50 {
		c := []toolCall{readCall(i)}
		if i == 0 {
			c = append(c, toolCall{"plan.complete", `{"plan":"Read the project's files one a turn, writing a note every tenth turn."}`})
		}
		if i%10 == 9 {
			c = append(c, toolCall{"fs.write", fmt.Sprintf(`{"path":"src/note%02d.go","content":"package main\n\n// written in turn %d\n"}`, i, i+1)})
		}
		calls = append(calls, c)
	}
	data, err := synthCassette(calls)
	if err != nil {
		return nil, err
	}
	progress("synthetic 50-turn session (fs.read each turn) for kernel memory")
	runtime.GC()
	before := procStatus("VmRSS")
	env, err := openTaskEnv(cfg, data, 50, scheduler.Config{}, nil)
	if err != nil {
		return nil, err
	}
	defer env.close()
	var heapPeak uint64
	var ms runtime.MemStats
	n := 0
	evs, done, wall, err := env.run("read the project's files, one a turn", "explore", func(ev agent.Event) {
		if ev.Type == agent.EventToolResult && ev.Tool != nil && !ev.Tool.OK && ev.Tool.Error != nil {
			progress(fmt.Sprintf("    %s failed: %s: %s", ev.Tool.Name, ev.Tool.Error.Code, textsafe.Cap(ev.Tool.Error.Error(), 200)))
		}
		if ev.Type == agent.EventToolResult {
			n++
			if n%5 == 0 {
				runtime.ReadMemStats(&ms)
				heapPeak = max(heapPeak, ms.HeapAlloc)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	runtime.ReadMemStats(&ms)
	heapPeak = max(heapPeak, ms.HeapAlloc)
	after, peak := procStatus("VmRSS"), procStatus("VmHWM")
	runtime.GC()
	runtime.ReadMemStats(&ms)
	live := ms.HeapAlloc
	turns := 0
	for _, e := range evs {
		if e.Type == agent.EventUsage {
			turns++
		}
	}
	progress(fmt.Sprintf("  %d turns, %d tool results, ended %s (%s) in %v; RSS %d → %d KiB, peak %d KiB, heap peak %d KiB, live heap after GC %d KiB",
		turns, n, done.Status, textsafe.Cap(done.Reason, 200), wall.Round(time.Millisecond), before, after, peak, heapPeak/1024, live/1024))
	kib := func(name string, v uint64) Row {
		return Row{Suite: "task", Name: name, Unit: "MiB", N: 1, P50: float64(v) / 1024, P90: float64(v) / 1024, P99: float64(v) / 1024}
	}
	label := fmt.Sprintf(" (%d-turn session, %d tool calls)", turns, n)
	return []Row{kib("kernel RSS before opening"+label, before), kib("kernel RSS after"+label, after),
		kib("kernel peak RSS, VmHWM"+label, peak), kib("kernel peak Go heap (HeapAlloc)"+label, heapPeak/1024),
		kib("kernel live Go heap after GC, kernel open"+label, live/1024)}, nil
}

// procStatus reads a kB field of /proc/self/status (0 when absent).
func procStatus(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && k == field {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
