package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// fakeClock is a settable clock whose timers fire on Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Advance moves time on and runs the timers that became due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

// armed counts pending timers.
func (c *fakeClock) armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped {
			n++
		}
	}
	return n
}

func newSched(t testing.TB, cfg Config, clock Clock) *Scheduler {
	t.Helper()
	s, err := New(Options{Config: cfg, Clock: clock, Memory: func() (float64, error) { return 0.1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

// recorder notes the order in which tasks start.
type recorder struct {
	mu    sync.Mutex
	order []string
}

func (r *recorder) task(id string, p Priority, tpl string) Task {
	return Task{ID: id, Type: AIGenerate, Priority: p, Template: tpl, Run: func(context.Context) error {
		r.mu.Lock()
		r.order = append(r.order, id)
		r.mu.Unlock()
		return nil
	}}
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.order)
}

// blocker occupies a slot until released.
func blocker(id string, p Priority, tpl string) (Task, chan struct{}) {
	release := make(chan struct{})
	return Task{ID: id, Type: TestRun, Priority: p, Template: tpl, Run: func(ctx context.Context) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}, release
}

func submit(t testing.TB, s *Scheduler, tk Task) *Handle {
	t.Helper()
	h, err := s.Submit(tk)
	if err != nil {
		t.Fatalf("submit %s: %v", tk.ID, err)
	}
	return h
}

func waitAll(t testing.TB, hs ...*Handle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, h := range hs {
		select {
		case <-h.Done():
		case <-ctx.Done():
			t.Fatalf("task %s did not finish: %+v", h.ID(), h.Info())
		}
	}
}

func waitState(t testing.TB, h *Handle, st TaskState) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for h.Info().State != st {
		if time.Now().After(deadline) {
			t.Fatalf("task %s never reached %s: %+v", h.ID(), st, h.Info())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPriorityOrderAndFIFO(t *testing.T) {
	s := newSched(t, Config{GlobalMax: 1}, nil)
	b, release := blocker("blocker", 1, "code-executor")
	hb := submit(t, s, b)
	waitState(t, hb, Running)
	r := &recorder{}
	var hs []*Handle
	for i, p := range []Priority{3, 1, 5, 2, 3, 1, 4, 2} {
		hs = append(hs, submit(t, s, r.task(fmt.Sprintf("t%d-p%d", i, p), p, []string{"ai-provider", "code-executor", "policy-sandbox"}[i%3])))
	}
	if st := s.Stats(); st.Running != 1 || st.Queued != 8 {
		t.Fatalf("stats %+v", st)
	}
	close(release)
	waitAll(t, hs...)
	want := []string{"t1-p1", "t5-p1", "t3-p2", "t7-p2", "t0-p3", "t4-p3", "t6-p4", "t2-p5"}
	if got := r.got(); !slices.Equal(got, want) {
		t.Fatalf("order %v\nwant  %v", got, want)
	}
}

func TestStarvationBump(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	s := newSched(t, Config{GlobalMax: 1, AgeThreshold: 10 * time.Second}, clock)
	if clock.armed() != 0 {
		t.Fatal("a timer is armed with nothing queued")
	}
	b, release := blocker("blocker", 1, "code-executor")
	waitState(t, submit(t, s, b), Running)
	r := &recorder{}
	low := submit(t, s, r.task("low-p4", 4, "code-executor"))
	clock.Advance(5 * time.Second)
	a := submit(t, s, r.task("a-p3", 3, "code-executor"))
	idle := submit(t, s, r.task("idle-p5", 5, "code-executor"))
	two := submit(t, s, r.task("two-p2", 2, "code-executor"))
	if clock.armed() != 1 {
		t.Fatalf("%d timers armed, want one (the earliest deadline)", clock.armed())
	}
	clock.Advance(5*time.Second - time.Millisecond)
	if e := low.Info().Effective; e != 4 {
		t.Fatalf("bumped before the threshold: %d", e)
	}
	clock.Advance(time.Millisecond) // low has waited exactly 10 s
	if e := low.Info().Effective; e != 3 {
		t.Fatalf("not bumped at the threshold: %d", e)
	}
	if a.Info().Effective != 3 || idle.Info().Effective != 5 {
		t.Fatalf("bumped too early: a %d idle %d", a.Info().Effective, idle.Info().Effective)
	}
	clock.Advance(10 * time.Second) // everyone waited past the threshold once
	if a.Info().Effective != 2 || idle.Info().Effective != 4 || low.Info().Effective != 3 || two.Info().Effective != 2 {
		t.Fatalf("second round: a %d idle %d low %d two %d", a.Info().Effective, idle.Info().Effective, low.Info().Effective, two.Info().Effective)
	}
	clock.Advance(time.Hour) // one level only, never above 2
	sys := submit(t, s, r.task("sys-p1", 1, "code-executor"))
	clock.Advance(time.Hour)
	if a.Info().Effective != 2 || idle.Info().Effective != 4 || sys.Info().Effective != 1 {
		t.Fatalf("after an hour: a %d idle %d sys %d", a.Info().Effective, idle.Info().Effective, sys.Info().Effective)
	}
	close(release)
	waitAll(t, low, a, idle, two, sys)
	want := []string{"sys-p1", "a-p3", "two-p2", "low-p4", "idle-p5"}
	if got := r.got(); !slices.Equal(got, want) {
		t.Fatalf("order %v\nwant  %v", got, want)
	}
	if clock.armed() != 0 {
		t.Fatalf("%d timers left armed", clock.armed())
	}
}

func TestDependencyFailurePropagation(t *testing.T) {
	s := newSched(t, Config{}, nil)
	boom := errors.New("tests did not compile")
	gate := make(chan struct{})
	a := submit(t, s, Task{ID: "A", Type: TestRun, Priority: 3, Template: "code-executor", Run: func(context.Context) error { <-gate; return boom }})
	e := submit(t, s, Task{ID: "E", Type: TestRun, Priority: 3, Template: "code-executor", Run: func(context.Context) error { <-gate; return nil }})
	var ran atomic.Int32
	run := func(context.Context) error { ran.Add(1); return nil }
	b := submit(t, s, Task{ID: "B", Type: AIGenerate, Priority: 3, Template: "ai-provider", Dependencies: []string{"A"}, Run: run})
	c := submit(t, s, Task{ID: "C", Type: Validate, Priority: 3, Template: "code-executor", Dependencies: []string{"B", "E"}, Run: run})
	d := submit(t, s, Task{ID: "D", Type: Review, Priority: 3, Template: "policy-sandbox", Dependencies: []string{"E"}, Run: run})
	for _, h := range []*Handle{b, c, d} {
		if st := h.Info().State; st != WaitingDependency {
			t.Fatalf("%s is %s before its dependencies finish", h.ID(), st)
		}
	}
	close(gate)
	waitAll(t, a, b, c, d, e)
	check := func(h *Handle, st TaskState, reason string) {
		t.Helper()
		in := h.Info()
		if in.State != st || in.Reason != reason {
			t.Fatalf("%s: %s %q, want %s %q", h.ID(), in.State, in.Reason, st, reason)
		}
	}
	check(a, Failed, "tests did not compile")
	check(b, Failed, "dependency failed: A")
	check(c, Failed, "dependency failed: B")
	check(d, Completed, "")
	if ran.Load() != 1 {
		t.Fatalf("%d dependents ran, want only D", ran.Load())
	}
	var te *TaskError
	if err := b.Err(); !errors.As(err, &te) || te.Reason != "dependency failed: A" || !uerr.HasCode(err, CodeTaskFailed) {
		t.Fatalf("B.Err() = %v", err)
	}
	if err := a.Err(); !errors.Is(err, boom) {
		t.Fatalf("A.Err() = %v", err)
	}
	// A dependency that already failed fails the new task at once.
	f := submit(t, s, Task{ID: "F", Type: Commit, Priority: 1, Template: "policy-sandbox", Dependencies: []string{"D", "A"}, Run: run})
	check(f, Failed, "dependency failed: A")
	for _, bad := range []Task{
		{ID: "G", Type: Commit, Priority: 1, Template: "x", Dependencies: []string{"nope"}, Run: run},
		{ID: "A", Type: Commit, Priority: 1, Template: "x", Run: run},
		{ID: "H", Type: "compile", Priority: 1, Template: "x", Run: run},
		{ID: "H", Type: Commit, Priority: 6, Template: "x", Run: run},
		{ID: "H", Type: Commit, Priority: 1, Template: "x", Dependencies: []string{"H"}, Run: run},
		{ID: "H", Type: Commit, Priority: 1, Template: "x"},
	} {
		if _, err := s.Submit(bad); err == nil {
			t.Fatalf("bad task %+v accepted", bad)
		}
	}
}

func TestCancel(t *testing.T) {
	s := newSched(t, Config{GlobalMax: 1}, nil)
	b, _ := blocker("running", 3, "code-executor")
	hb := submit(t, s, b)
	waitState(t, hb, Running)
	q := submit(t, s, Task{ID: "queued", Type: AIGenerate, Priority: 3, Template: "ai-provider", Run: func(context.Context) error { return nil }})
	dep := submit(t, s, Task{ID: "dep", Type: Validate, Priority: 3, Template: "ai-provider", Dependencies: []string{"queued"}, Run: func(context.Context) error { return nil }})
	if err := s.Cancel("queued"); err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel("running"); err != nil {
		t.Fatal(err)
	}
	waitAll(t, hb, q, dep)
	if hb.Info().State != Cancelled || q.Info().State != Cancelled || dep.Info().Reason != "dependency failed: queued" {
		t.Fatalf("%+v %+v %+v", hb.Info(), q.Info(), dep.Info())
	}
	if err := s.Cancel("nope"); !uerr.HasCode(err, CodeUnknownTask) {
		t.Fatal(err)
	}
}

// TestLimitsUnder1000ConcurrentSubmissions: 1000 goroutines submit at once;
// the global and per-template limits are reached and never exceeded.
func TestLimitsUnder1000ConcurrentSubmissions(t *testing.T) {
	s := newSched(t, Config{}, nil)
	cfg := s.Config()
	tpls := []string{"ai-provider", "code-executor", "policy-sandbox", "integration-test"}
	var global atomic.Int32
	var per [4]atomic.Int32
	var maxGlobal atomic.Int32
	var maxPer [4]atomic.Int32
	var violations atomic.Int32
	raise := func(a *atomic.Int32, v int32) {
		for {
			m := a.Load()
			if v <= m || a.CompareAndSwap(m, v) {
				return
			}
		}
	}
	const n = 1000
	hs := make([]*Handle, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ti := i % len(tpls)
			tpl := tpls[ti]
			run := func(context.Context) error {
				g := global.Add(1)
				p := per[ti].Add(1)
				raise(&maxGlobal, g)
				raise(&maxPer[ti], p)
				if int(g) > cfg.GlobalMax || (ti < 3 && int(p) > cfg.PerTemplate[tpl]) {
					violations.Add(1)
				}
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				per[ti].Add(-1)
				global.Add(-1)
				return nil
			}
			h, err := s.Submit(Task{ID: fmt.Sprintf("t%04d", i), Type: AIGenerate, Priority: Priority(1 + i%5), Template: tpl, Run: run})
			if err != nil {
				t.Error(err)
				return
			}
			hs[i] = h
		}()
	}
	wg.Wait()
	waitAll(t, hs...)
	for _, h := range hs {
		if h.Info().State != Completed {
			t.Fatalf("%+v", h.Info())
		}
	}
	if violations.Load() != 0 {
		t.Fatalf("%d limit violations", violations.Load())
	}
	if int(maxGlobal.Load()) != cfg.GlobalMax {
		t.Fatalf("global peak %d, want %d", maxGlobal.Load(), cfg.GlobalMax)
	}
	for i, tpl := range tpls[:3] {
		if int(maxPer[i].Load()) != cfg.PerTemplate[tpl] {
			t.Fatalf("%s peak %d, want %d", tpl, maxPer[i].Load(), cfg.PerTemplate[tpl])
		}
	}
	if st := s.Stats(); st.Running != 0 || st.Queued != 0 {
		t.Fatalf("stats after: %+v", st)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{{GlobalMax: -1}, {PerTemplate: map[string]int{"x": 0}}, {MemoryHigh: 2}} {
		if _, err := New(Options{Config: c}); !uerr.HasCode(err, CodeBadConfig) {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	s, _ := New(Options{})
	if c := s.Config(); c.GlobalMax != 4 || c.PerTemplate["ai-provider"] != 2 || c.PerTemplate["code-executor"] != 2 || c.PerTemplate["policy-sandbox"] != 1 || c.PauseGrace != time.Second {
		t.Fatalf("defaults %+v", c)
	}
	if used, err := SystemMemoryUsed(); err != nil || used <= 0 || used >= 1 {
		t.Fatalf("memory %v %v", used, err)
	}
}

func TestRunWaitsAndCancelsWithTheContext(t *testing.T) {
	s := newSched(t, Config{}, nil)
	if err := s.Run(context.Background(), Task{ID: "tool-fs/fs.read call_1", Type: TestRun, Priority: 3, Template: "code-executor",
		Run: func(context.Context) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.Run(context.Background(), Task{ID: "call_2", Type: TestRun, Priority: 3, Template: "code-executor",
		Run: func(context.Context) error { return boom }}); !errors.Is(err, boom) {
		t.Fatalf("Run = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var sawCancel atomic.Bool
	err := s.Run(ctx, Task{ID: "call_3", Type: TestRun, Priority: 3, Template: "code-executor", Run: func(c context.Context) error {
		<-c.Done()
		sawCancel.Store(true)
		return c.Err()
	}})
	if !errors.Is(err, context.DeadlineExceeded) || !sawCancel.Load() {
		t.Fatalf("Run = %v, task saw cancel %v", err, sawCancel.Load())
	}
	if in, _ := s.Info("call_3"); in.State != Cancelled {
		t.Fatalf("%+v", in)
	}
	if _, err := s.Submit(Task{ID: "bad\x1bid", Type: TestRun, Priority: 3, Template: "x", Run: func(context.Context) error { return nil }}); !uerr.HasCode(err, CodeBadTask) {
		t.Fatalf("control character in id: %v", err)
	}
}
