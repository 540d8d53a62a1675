package scheduler

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Config is the scheduler configuration.
type Config struct {
	// GlobalMax bounds all running tasks (default 4).
	GlobalMax int
	// PerTemplate bounds running tasks per sandbox template (defaults:
	// ai-provider 2, code-executor 2, policy-sandbox 1). A template not
	// listed is bounded by GlobalMax only.
	PerTemplate map[string]int
	// AgeThreshold is how long a task waits in the queue before its
	// effective priority is bumped one level (never above 2; priority 1 is
	// immune). Default 30 s.
	AgeThreshold time.Duration
	// PauseGrace is how long a task's plugin gets between PAUSE_SIGNAL and
	// the pause (default 1 s).
	PauseGrace time.Duration
	// MemoryHigh: above this used fraction of system memory a preemption
	// destroys instead of pausing (default 0.8).
	MemoryHigh float64
	// AlmostDone: a task past this fraction of its MaxDuration is left to
	// finish (default 0.8).
	AlmostDone float64
	// KeepFinished is how many finished tasks are remembered for later
	// dependencies and Info (default 4096).
	KeepFinished int
}

// DefaultConfig is the scheduler's default configuration.
func DefaultConfig() Config {
	return Config{GlobalMax: 4, PerTemplate: map[string]int{"ai-provider": 2, "code-executor": 2, "policy-sandbox": 1},
		AgeThreshold: 30 * time.Second, PauseGrace: time.Second, MemoryHigh: 0.8, AlmostDone: 0.8, KeepFinished: 4096}
}

func (c *Config) fill() error {
	d := DefaultConfig()
	if c.GlobalMax == 0 {
		c.GlobalMax = d.GlobalMax
	}
	if c.PerTemplate == nil {
		c.PerTemplate = d.PerTemplate
	}
	if c.AgeThreshold == 0 {
		c.AgeThreshold = d.AgeThreshold
	}
	if c.PauseGrace == 0 {
		c.PauseGrace = d.PauseGrace
	}
	if c.MemoryHigh == 0 {
		c.MemoryHigh = d.MemoryHigh
	}
	if c.AlmostDone == 0 {
		c.AlmostDone = d.AlmostDone
	}
	if c.KeepFinished == 0 {
		c.KeepFinished = d.KeepFinished
	}
	bad := func(why string) error {
		return uerr.New(CodeBadConfig, "bad scheduler configuration", why, "fix the scheduler.* settings")
	}
	if c.GlobalMax < 1 {
		return bad("global_max must be at least 1")
	}
	for t, n := range c.PerTemplate {
		if n < 1 {
			return bad(fmt.Sprintf("per_template.%s must be at least 1", t))
		}
	}
	if c.AgeThreshold < 0 || c.PauseGrace < 0 || c.MemoryHigh <= 0 || c.MemoryHigh > 1 || c.AlmostDone <= 0 || c.AlmostDone > 1 {
		return bad("thresholds must be positive (fractions at most 1)")
	}
	return nil
}

// Clock supplies time and timers; tests inject a fake one.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Options configure New.
type Options struct {
	Config Config
	Clock  Clock // nil: the real clock
	// Memory returns the used fraction of system memory (0..1); nil reads
	// /proc/meminfo.
	Memory func() (float64, error)
	Logger hclog.Logger
}

// task is a submitted Task with its scheduling state. Guarded by
// Scheduler.mu.
type task struct {
	Task
	seq        uint64
	state      TaskState
	eff        Priority
	reason     string
	err        error
	submitted  time.Time
	queuedAt   time.Time
	started    time.Time
	runStart   time.Time     // start of the current running stretch
	ran        time.Duration // running time before runStart
	finished   time.Time
	pauses     int
	pending    int // unfinished dependencies
	dependents []*task
	idx        int  // position in its template heap, -1 when not queued
	counted    bool // holds concurrency slots
	launched   bool // Run was started
	preempting bool // a pause or destroy is under way
	unpausable bool // a pause failed once: never try again
	destroyed  bool
	cancelReq  bool
	ctx        context.Context
	cancel     context.CancelFunc
	done       chan struct{}
}

func (t *task) info() Info {
	return Info{ID: t.ID, Type: t.Type, Priority: t.Priority, Effective: t.eff, Template: t.Template, State: t.state, Reason: t.reason,
		Submitted: t.submitted, Started: t.started, Finished: t.finished, Pauses: t.pauses}
}

// less orders the queue: effective priority, then submission order.
func less(a, b *task) bool {
	if a.eff != b.eff {
		return a.eff < b.eff
	}
	return a.seq < b.seq
}

// taskHeap is a min-heap of one template's ready tasks.
type taskHeap []*task

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return less(h[i], h[j]) }
func (h taskHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *taskHeap) Push(x any)        { t := x.(*task); t.idx = len(*h); *h = append(*h, t) }
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.idx = -1
	return t
}

// bumpEntry is a queued task's starvation deadline. The threshold is one
// constant, so deadlines are in queueing order: a FIFO, one timer.
type bumpEntry struct {
	t  *task
	at time.Time
	// queuedAt identifies the queueing the entry belongs to (a task
	// queued again gets a new entry).
	queuedAt time.Time
}

// Scheduler orders tasks by priority within concurrency limits. It is
// event-driven: it acts when a task is submitted, finishes, is cancelled,
// when a pause completes, and when a starvation deadline passes (one
// timer for the earliest); there is no polling loop. Safe for concurrent
// use.
type Scheduler struct {
	cfg    Config
	clock  Clock
	memory func() (float64, error)
	log    hclog.Logger

	mu        sync.Mutex
	seq       uint64
	tasks     map[string]*task
	finished  []string // finished ids, oldest first (pruned to KeepFinished)
	queues    map[string]*taskHeap
	running   int
	active    map[*task]struct{} // tasks whose Run is under way and that hold slots
	perTpl    map[string]int
	bumps     []bumpEntry
	bumpTimer Timer
	bumpAt    time.Time
	closed    bool
	wg        sync.WaitGroup
	// closing are done channels to close once s.mu is released, so that a
	// waiter woken by one never queues behind the dispatch that ended it.
	closing []chan struct{}
	// starting are tasks dispatch chose; their goroutines start once s.mu
	// is released, so a quick task's completion never contends with the
	// dispatch that started it.
	starting []*task
}

// unlock releases s.mu, then signals the tasks that ended meanwhile and
// starts the ones dispatched.
func (s *Scheduler) unlock() {
	cl, st := s.closing, s.starting
	s.closing, s.starting = nil, nil
	s.mu.Unlock()
	for _, c := range cl {
		close(c)
	}
	for _, t := range st {
		go func() {
			defer s.wg.Done()
			err := runSafe(t.ctx, t.Run)
			s.finish(t, err)
		}()
	}
}

// New returns a scheduler.
func New(o Options) (*Scheduler, error) {
	cfg := o.Config
	cfg.PerTemplate = maps.Clone(cfg.PerTemplate)
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.Memory == nil {
		o.Memory = SystemMemoryUsed
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return &Scheduler{cfg: cfg, clock: o.Clock, memory: o.Memory, log: o.Logger.Named("scheduler"),
		tasks: map[string]*task{}, queues: map[string]*taskHeap{}, perTpl: map[string]int{}, active: map[*task]struct{}{}}, nil
}

// Config returns the configuration in force.
func (s *Scheduler) Config() Config {
	c := s.cfg
	c.PerTemplate = maps.Clone(c.PerTemplate)
	return c
}

// Handle follows one submitted task.
type Handle struct {
	s *Scheduler
	t *task
}

// ID is the task's id.
func (h *Handle) ID() string { return h.t.ID }

// Done is closed when the task reaches an end state.
func (h *Handle) Done() <-chan struct{} { return h.t.done }

// Err is nil for a completed task, a *TaskError for a failed or cancelled
// one; it blocks until the task is done.
func (h *Handle) Err() error {
	<-h.t.done
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.s.errOf(h.t)
}

// Wait waits for the task or ctx.
func (h *Handle) Wait(ctx context.Context) error {
	select {
	case <-h.t.done:
		return h.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Info is the task's current state.
func (h *Handle) Info() Info {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	return h.t.info()
}

func (s *Scheduler) errOf(t *task) error {
	if t.state == Completed {
		return nil
	}
	return &TaskError{ID: t.ID, State: t.state, Reason: t.reason, Err: t.err}
}

// Submit queues a task. Its dependencies must have been submitted before
// (so the graph cannot have a cycle); a dependency that already failed or
// was cancelled fails the task at once ("dependency failed: <id>").
func (s *Scheduler) Submit(tk Task) (*Handle, error) {
	if err := tk.validate(); err != nil {
		return nil, err
	}
	tk.Dependencies = slices.Clone(tk.Dependencies)
	s.mu.Lock()
	defer s.unlock()
	if s.closed {
		return nil, uerr.New(CodeClosed, "the scheduler is closed", "the kernel is shutting down", "")
	}
	if _, dup := s.tasks[tk.ID]; dup {
		return nil, uerr.New(CodeDuplicate, "task "+tk.ID+" was already submitted", "task ids are unique", "use a new id")
	}
	deps := make([]*task, 0, len(tk.Dependencies))
	for _, id := range tk.Dependencies {
		d, ok := s.tasks[id]
		if !ok {
			return nil, uerr.New(CodeUnknownDep, fmt.Sprintf("task %s depends on unknown task %s", tk.ID, id),
				"dependencies must be submitted first (and are forgotten once many later tasks have finished)", "submit the dependency first")
		}
		deps = append(deps, d)
	}
	now := s.clock.Now()
	s.seq++
	t := &task{Task: tk, seq: s.seq, eff: tk.Priority, submitted: now, idx: -1, done: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	s.tasks[t.ID] = t
	h := &Handle{s: s, t: t}
	for _, d := range deps {
		switch d.state {
		case Completed:
		case Failed, Cancelled:
			s.fail(t, "dependency failed: "+d.ID)
			return h, nil
		default:
			t.pending++
			d.dependents = append(d.dependents, t)
		}
	}
	if t.pending > 0 {
		t.state = WaitingDependency
		return h, nil
	}
	s.enqueue(t)
	s.dispatch()
	return h, nil
}

// Run submits t and waits for it to end: nil when it completed, its
// *TaskError otherwise. If ctx ends first, the task is cancelled and Run
// returns once it has ended, with ctx's error.
func (s *Scheduler) Run(ctx context.Context, t Task) error {
	h, err := s.Submit(t)
	if err != nil {
		return err
	}
	select {
	case <-h.Done():
		return h.Err()
	case <-ctx.Done():
		_ = s.Cancel(t.ID)
		<-h.Done()
		return ctx.Err()
	}
}

// Cancel cancels a task: a waiting one ends at once (its dependents fail),
// a running or paused one has its context cancelled and ends when Run
// returns.
func (s *Scheduler) Cancel(id string) error {
	s.mu.Lock()
	defer s.unlock()
	t, ok := s.tasks[id]
	if !ok {
		return uerr.New(CodeUnknownTask, "no task "+id, "it was never submitted or was forgotten", "")
	}
	if t.state.Final() {
		return nil
	}
	t.cancelReq = true
	t.cancel()
	switch {
	case t.launched && t.state == Paused:
		// The sandbox is frozen: thaw it (without taking a slot) so Run
		// sees the cancellation and returns.
		s.dequeue(t)
		t.state = Running
		s.resume(t)
	case !t.launched:
		s.dequeue(t)
		s.end(t, Cancelled, "cancelled", nil)
		s.dispatch()
	}
	return nil
}

// Info returns a task's state.
func (s *Scheduler) Info(id string) (Info, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return Info{}, false
	}
	return t.info(), true
}

// Stats is the scheduler's load.
type Stats struct {
	Running     int
	PerTemplate map[string]int
	Queued      int
	Waiting     int
}

// Stats returns the current load.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Running: s.running, PerTemplate: maps.Clone(s.perTpl)}
	for _, q := range s.queues {
		st.Queued += q.Len()
	}
	for _, t := range s.tasks {
		if t.state == WaitingDependency {
			st.Waiting++
		}
	}
	return st
}

// Close refuses new tasks, cancels every task not yet finished and waits
// (until ctx ends) for the running ones to return.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	ids := make([]string, 0, len(s.tasks))
	for id, t := range s.tasks {
		if !t.state.Final() {
			ids = append(ids, id)
		}
	}
	if s.bumpTimer != nil {
		s.bumpTimer.Stop()
		s.bumpTimer = nil
	}
	s.mu.Unlock()
	for _, id := range ids {
		_ = s.Cancel(id)
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("scheduler close: %w", ctx.Err())
	}
}

// ---- queue ----

func (s *Scheduler) queue(tpl string) *taskHeap {
	q := s.queues[tpl]
	if q == nil {
		q = &taskHeap{}
		s.queues[tpl] = q
	}
	return q
}

// enqueue makes t ready (queued, or paused waiting to resume) and starts
// its starvation clock.
func (s *Scheduler) enqueue(t *task) {
	if t.state != Paused {
		t.state = Queued
	}
	now := s.clock.Now()
	t.queuedAt = now
	heap.Push(s.queue(t.Template), t)
	if t.Priority > PriorityHigh && t.eff == t.Priority {
		s.bumps = append(s.bumps, bumpEntry{t: t, at: now.Add(s.cfg.AgeThreshold), queuedAt: now})
		s.armBump()
	}
}

func (s *Scheduler) dequeue(t *task) {
	if t.idx >= 0 {
		heap.Remove(s.queues[t.Template], t.idx)
	}
}

// armBump keeps one timer on the earliest starvation deadline.
func (s *Scheduler) armBump() {
	if len(s.bumps) == 0 || s.closed {
		return
	}
	at := s.bumps[0].at
	if s.bumpTimer != nil {
		if !s.bumpAt.After(at) {
			return
		}
		s.bumpTimer.Stop()
	}
	s.bumpAt = at
	s.bumpTimer = s.clock.AfterFunc(at.Sub(s.clock.Now()), s.onBump)
}

// onBump raises every queued task whose wait passed the threshold by one
// level (to at most 2), then dispatches.
func (s *Scheduler) onBump() {
	s.mu.Lock()
	defer s.unlock()
	s.bumpTimer = nil
	now := s.clock.Now()
	n := 0
	for ; n < len(s.bumps); n++ {
		e := s.bumps[n]
		if e.at.After(now) {
			break
		}
		t := e.t
		if t.idx < 0 || !t.queuedAt.Equal(e.queuedAt) || t.eff != t.Priority {
			continue // ran, finished or was queued again since
		}
		t.eff = max(PriorityHigh, t.Priority-1)
		heap.Fix(s.queues[t.Template], t.idx)
	}
	s.bumps = slices.Delete(s.bumps, 0, n)
	s.armBump()
	s.dispatch()
}

// ---- dispatch ----

func (s *Scheduler) limit(tpl string) int {
	if n, ok := s.cfg.PerTemplate[tpl]; ok {
		return n
	}
	return s.cfg.GlobalMax
}

// best returns the best queued task over all templates, restricted to
// templates with a free slot when free is set.
func (s *Scheduler) best(free bool) *task {
	var b *task
	for tpl, q := range s.queues {
		if q.Len() == 0 || (free && s.perTpl[tpl] >= s.limit(tpl)) {
			continue
		}
		if h := (*q)[0]; b == nil || less(h, b) {
			b = h
		}
	}
	return b
}

// dispatch starts (or resumes) the best ready tasks while slots are free,
// and preempts for the best waiting one when none is. Called with s.mu.
func (s *Scheduler) dispatch() {
	for s.running < s.cfg.GlobalMax {
		t := s.best(true)
		if t == nil {
			break
		}
		heap.Remove(s.queues[t.Template], t.idx)
		s.take(t)
		if t.state == Paused {
			t.state = Running
			s.resume(t)
			continue
		}
		s.start(t)
	}
	if w := s.best(false); w != nil {
		s.preemptFor(w)
	}
}

func (s *Scheduler) take(t *task) {
	t.counted = true
	s.active[t] = struct{}{}
	s.running++
	s.perTpl[t.Template]++
	t.runStart = s.clock.Now()
}

func (s *Scheduler) release(t *task) {
	if !t.counted {
		return
	}
	t.counted = false
	delete(s.active, t)
	s.running--
	s.perTpl[t.Template]--
	t.ran += s.clock.Now().Sub(t.runStart)
}

func (s *Scheduler) start(t *task) {
	t.state = Running
	t.launched = true
	t.started = s.clock.Now()
	s.wg.Add(1)
	s.starting = append(s.starting, t)
}

func runSafe(ctx context.Context, run func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("task panicked: %v", r)
		}
	}()
	return run(ctx)
}

// finish records Run's return.
func (s *Scheduler) finish(t *task, err error) {
	s.mu.Lock()
	defer s.unlock()
	s.dequeue(t) // Run may return while paused
	s.release(t)
	switch {
	case t.destroyed:
		s.end(t, Failed, "preempted: sandbox destroyed to release memory", err)
	case t.cancelReq:
		s.end(t, Cancelled, "cancelled", err)
	case err != nil:
		s.end(t, Failed, err.Error(), err)
	default:
		s.end(t, Completed, "", nil)
	}
	s.dispatch()
}

// end puts t in a final state and settles its dependents.
func (s *Scheduler) end(t *task, st TaskState, reason string, err error) {
	t.state, t.reason, t.err, t.finished = st, reason, err, s.clock.Now()
	t.cancel()
	s.closing = append(s.closing, t.done)
	s.finished = append(s.finished, t.ID)
	for _, d := range t.dependents {
		if d.state != WaitingDependency {
			continue
		}
		if st != Completed {
			s.fail(d, "dependency failed: "+t.ID)
			continue
		}
		if d.pending--; d.pending == 0 {
			s.enqueue(d)
		}
	}
	t.dependents = nil
	s.prune()
}

// fail ends a task that never ran.
func (s *Scheduler) fail(t *task, reason string) {
	s.end(t, Failed, reason, nil)
}

// prune forgets the oldest finished tasks beyond KeepFinished.
func (s *Scheduler) prune() {
	over := len(s.finished) - s.cfg.KeepFinished
	if over <= 0 {
		return
	}
	for _, id := range s.finished[:over] {
		delete(s.tasks, id)
	}
	s.finished = slices.Delete(s.finished, 0, over)
}

// ---- preemption ----

// preemptFor frees a slot for w when a running task of lower priority can
// give it up: a victim past 80 % of its
// MaxDuration is left to finish (WAIT); with system memory above 80 % the
// victim is destroyed; otherwise it is paused (PAUSE_SIGNAL, 1 s grace,
// pause) and resumed when a slot is free again.
func (s *Scheduler) preemptFor(w *task) {
	tplFull := s.perTpl[w.Template] >= s.limit(w.Template)
	var victim *task
	now := s.clock.Now()
	for r := range s.active {
		if r.state != Running {
			continue
		}
		if tplFull && r.Template != w.Template {
			continue
		}
		if r.preempting {
			return // a slot is already being freed: wait for it
		}
		if r.Sandbox == nil || r.unpausable || r.eff <= w.eff {
			continue
		}
		if r.MaxDuration > 0 && float64(r.ran+now.Sub(r.runStart)) > s.cfg.AlmostDone*float64(r.MaxDuration) {
			continue // WAIT: almost done
		}
		if victim == nil || r.eff > victim.eff || (r.eff == victim.eff && r.seq > victim.seq) {
			victim = r
		}
	}
	if victim == nil {
		return
	}
	victim.preempting = true
	used, err := s.memory()
	if err != nil {
		s.log.Warn("cannot read memory usage; pausing instead of destroying", "error", err)
	}
	if err == nil && used > s.cfg.MemoryHigh {
		s.log.Info("destroying a task to release memory", "task", victim.ID, "for", w.ID, "memory_used", used)
		victim.destroyed = true
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := victim.Sandbox.Destroy(ctx); err != nil {
				s.log.Error("destroy failed", "task", victim.ID, "error", err)
			}
			victim.cancel()
		}()
		return
	}
	s.log.Debug("pausing a task", "task", victim.ID, "for", w.ID)
	s.wg.Add(1)
	go s.pause(victim)
}

// pause runs outside the lock: signal, grace, pause; then the victim gives
// up its slots and waits in its queue to be resumed.
func (s *Scheduler) pause(v *task) {
	defer s.wg.Done()
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.PauseGrace)
	if err := v.Sandbox.Notify(grace, SignalPause); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		s.log.Debug("pause signal not delivered", "task", v.ID, "error", err)
	}
	cancel()
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	err := v.Sandbox.Pause(ctx)
	cancel2()
	s.mu.Lock()
	defer s.unlock()
	v.preempting = false
	if err != nil {
		s.log.Warn("pause failed; the task keeps running", "task", v.ID, "error", err)
		v.unpausable = true
		s.dispatch()
		return
	}
	if v.state != Running || v.cancelReq {
		// It finished or was cancelled meanwhile: thaw what is left.
		go func() { _ = v.Sandbox.Resume(context.Background()) }()
		return
	}
	s.release(v)
	v.state = Paused
	v.pauses++
	s.enqueue(v)
	s.dispatch()
}

// resume thaws a paused task that got its slots back.
func (s *Scheduler) resume(t *task) {
	t.preempting = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := t.Sandbox.Resume(ctx)
		if err == nil {
			if nerr := t.Sandbox.Notify(ctx, SignalResume); nerr != nil {
				s.log.Debug("resume signal not delivered", "task", t.ID, "error", nerr)
			}
		}
		s.mu.Lock()
		t.preempting = false
		if err != nil {
			// A sandbox that cannot be thawed cannot finish: end it.
			s.log.Error("resume failed; destroying the task", "task", t.ID, "error", err)
			t.destroyed = true
			t.cancel()
			s.unlock()
			_ = t.Sandbox.Destroy(ctx)
			return
		}
		s.dispatch()
		s.unlock()
	}()
}
