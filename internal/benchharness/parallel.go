package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/scheduler"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/policy"
)

// parallelSuite measures the parallel tool calls: one model turn
// with ten fs.read calls, warm, beside one turn with a single fs.read.
// The agent runs a turn's non-conflicting calls concurrently. fs.read is a
// light call (router.LightCall): once tool-fs runs, its reads do not hold
// a code-executor slot (2 by default), so the default limits should not
// bound the turn; it is measured with the default limits and again with
// code-executor raised to 10 to show that.
func parallelSuite(cfg config, progress func(string)) ([]Row, error) {
	var rows []Row
	for _, c := range []struct {
		label string
		sched scheduler.Config
	}{
		{"default scheduler: code-executor 2 at once", scheduler.Config{}},
		{"code-executor 10 at once", scheduler.Config{GlobalMax: 10, PerTemplate: map[string]int{"ai-provider": 2, "code-executor": 10, "policy-sandbox": 1}}},
	} {
		progress(c.label)
		r, err := parallelRun(cfg, c.label, c.sched, progress)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

func parallelRun(cfg config, label string, sched scheduler.Config, progress func(string)) ([]Row, error) {
	// Every call reads another file (the futility check stops a task that
	// repeats a call). Turn 1 warms tool-fs (its sandbox start); then
	// samples pairs of (single, ten).
	f := 0
	next := func(n int) []toolCall {
		var out []toolCall
		for range n {
			out = append(out, readCall(f))
			f++
		}
		return out
	}
	calls := [][]toolCall{next(10)}
	for range cfg.samples {
		calls = append(calls, next(1), next(10))
	}
	data, err := synthCassette(calls)
	if err != nil {
		return nil, err
	}
	env, err := openTaskEnv(cfg, data, f, sched, nil)
	if err != nil {
		return nil, err
	}
	defer env.close()
	// A warm session reads a project nobody is changing: wait out the
	// view's racy window (a directory modified in the last 2 s is read
	// again on every refresh, since coarse timestamps could hide a second
	// change), which the fresh copy and commit above would otherwise keep
	// open for the first measured turns.
	time.Sleep(2100 * time.Millisecond) // host/workspace racyWindow is 2 s
	progress(fmt.Sprintf("one task: a warm-up turn of 10 fs.read, then %d x (1 fs.read turn, 10 fs.read turn)", cfg.samples))
	evs, done, _, err := env.run("read the project's files", "explore", nil)
	if err != nil {
		return nil, err
	}
	type phase struct {
		from, to time.Time
		n        int
		durs     []time.Duration
	}
	phases := map[int]*phase{}
	for _, e := range evs {
		if e.Tool == nil || e.Tool.Name != "fs.read" {
			continue
		}
		p := phases[e.Turn]
		if p == nil {
			p = &phase{}
			phases[e.Turn] = p
		}
		switch e.Type {
		case agent.EventToolExecuting:
			if p.from.IsZero() || e.Time.Before(p.from) {
				p.from = e.Time
			}
		case agent.EventToolResult:
			if !e.Tool.OK {
				return nil, fmt.Errorf("fs.read failed in turn %d: %v", e.Turn, e.Tool.Error)
			}
			p.n++
			p.to = e.Time
			p.durs = append(p.durs, time.Duration(e.Tool.DurationMS)*time.Millisecond)
		}
	}
	var single, single1, tenPhase, tenSum []time.Duration
	for turn, p := range phases {
		if turn == 1 || p.from.IsZero() {
			continue
		}
		switch p.n {
		case 1:
			single = append(single, p.to.Sub(p.from))
			single1 = append(single1, p.durs[0])
		case 10:
			tenPhase = append(tenPhase, p.to.Sub(p.from))
			var s time.Duration
			for _, d := range p.durs {
				s += d
			}
			tenSum = append(tenSum, s)
		}
	}
	if len(tenPhase) == 0 || len(single) == 0 {
		return nil, fmt.Errorf("the task ran no measured turn (ended %s: %s)", done.Status, done.Reason)
	}
	r1 := stats("parallel", "tool phase of a turn with 1 fs.read (warm; "+label+")", single, "ms")
	rd := stats("parallel", "its fs.read DurationMS (ms resolution; "+label+")", single1, "ms")
	rs := stats("parallel", "sum of the 10 calls' DurationMS ("+label+")", tenSum, "ms")
	r10 := stats("parallel", "tool phase of a turn with 10 fs.read (warm; "+label+")", tenPhase, "ms")
	r10.Baseline = r1.Name
	verdict(&r10, 20)
	progress(fmt.Sprintf("  ended %s (%s); 10-call phase p50 %.1f ms vs single %.1f ms (sum of the ten %.1f ms)", done.Status, done.Reason, r10.P50, r1.P50, rs.P50))
	// Every call to tool-fs first refreshes the plugin's view under the
	// view's lock: the part of a call that parallel calls cannot overlap.
	spec, _ := env.k.Plugins.Spec("tool-fs")
	// The reader the kernel uses for tool-fs (its sandbox template is part
	// of the view's filter key: a reader without it refreshes everything,
	// and the kernel's next call does again).
	reader := workspace.Reader{Caller: policy.Caller{Kind: "plugin", Plugin: spec.Name, PluginKind: string(spec.Kind), Tags: spec.Tags, Hosts: spec.Network}, SessionMode: "explore", Sandbox: spec.Template}
	var prep, prep10 []time.Duration
	for range 20 {
		t0 := time.Now()
		if _, err := env.k.Session.Prepare(context.Background(), reader); err != nil {
			return nil, err
		}
		prep = append(prep, time.Since(t0))
	}
	for range 5 {
		var wg sync.WaitGroup
		t0 := time.Now()
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = env.k.Session.Prepare(context.Background(), reader)
			}()
		}
		wg.Wait()
		prep10 = append(prep10, time.Since(t0))
	}
	rp := stats("parallel", "view refresh of tool-fs's view, nothing changed ("+label+")", prep, "ms")
	rp10 := stats("parallel", "10 concurrent view refreshes of tool-fs's view ("+label+")", prep10, "ms")
	rp10.Baseline = rp.Name
	return []Row{r1, rd, rs, r10, rp, rp10}, nil
}
