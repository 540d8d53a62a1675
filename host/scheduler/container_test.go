package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/internal/testbin"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// The container tests run a real workload in a real container through the
// runtime-docker adapter (in its bubblewrap jail), as the kernel does.
var cenv struct {
	dir       string
	ticker    string
	lease     *sandbox.Lease
	pc        *plugin.Client
	rt        rt.Client
	image     string
	dockerErr error
}

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "fh")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	_ = os.Chmod(dir, 0o755)
	cenv.dir = dir
	cenv.dockerErr = setupDocker(dir)
	code := m.Run()
	if cenv.rt != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		left, _ := cenv.rt.List(ctx, map[string]string{sandbox.LabelKernel: cenv.lease.KernelID}, true)
		for _, c := range left {
			_ = cenv.rt.Resume(ctx, c.ID)
			if err := cenv.rt.Remove(ctx, c.ID, true, true); err != nil {
				fmt.Fprintf(os.Stderr, "cannot remove test container %s: %v\n", c.Name, err)
				code = 1
			}
		}
		cancel()
		cenv.pc.Kill()
	}
	if cenv.lease != nil {
		_ = cenv.lease.Release()
	}
	return code
}

func setupDocker(dir string) error {
	if _, err := os.Stat("/var/run/docker.sock"); err != nil && os.Getenv("DOCKER_HOST") == "" {
		return fmt.Errorf("no docker socket: %w", err)
	}
	bin := filepath.Join(dir, "bin")
	adapter := filepath.Join(bin, "runtime-docker")
	cenv.ticker = filepath.Join(bin, "ticker")
	if err := testbin.IntoE("builtin-plugins/runtime-docker", adapter); err != nil {
		return err
	}
	if err := testbin.IntoE("host/scheduler/internal/ticker", cenv.ticker); err != nil {
		return err
	}
	_ = os.Chmod(bin, 0o755)
	var err error
	if cenv.lease, err = sandbox.AcquireLease(filepath.Join(dir, "run"), sandbox.NewKernelID()); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if cenv.pc, cenv.rt, err = sandbox.LaunchAdapter(ctx, &sandbox.AdapterJail{Lease: cenv.lease, Require: os.Getenv(sandbox.EnvRequireJail) != ""}, adapter, nil); err != nil {
		return err
	}
	tar, err := sandbox.BaseImageTar()
	if err != nil {
		return err
	}
	cenv.image = sandbox.BaseImageRef(tar)
	_, err = cenv.rt.PrepareImage(ctx, cenv.image, tar, map[string]string{sandbox.LabelManaged: "1"})
	return err
}

func needDocker(t *testing.T) {
	t.Helper()
	if cenv.dockerErr == nil {
		return
	}
	if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
		t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but Docker is unusable: %v", cenv.dockerErr)
	}
	t.Skipf("Docker is not available: %v", cenv.dockerErr)
}

// workload is one ticker container.
type workload struct {
	id, out string
}

func startWorkload(t *testing.T, name string) *workload {
	t.Helper()
	out := t.TempDir()
	_ = os.Chmod(out, 0o777)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := rt.Spec{
		Name: fmt.Sprintf("fluffy-sched-test-%s-%d", name, time.Now().UnixNano()), Image: cenv.image,
		Cmd:    []string{"/plugin/ticker", "/out"},
		User:   fmt.Sprintf("%d:%d", sandbox.SandboxUID, sandbox.SandboxGID),
		Labels: map[string]string{sandbox.LabelManaged: "1", sandbox.LabelKernel: cenv.lease.KernelID, sandbox.LabelOwner: cenv.lease.Owner, sandbox.LabelPlugin: "sched-test"},
		Mounts: []rt.Mount{
			{Type: rt.MountBind, Source: cenv.ticker, Target: "/plugin/ticker", ReadOnly: true},
			{Type: rt.MountBind, Source: out, Target: "/out"},
		},
		NetworkMode: "none", ReadOnlyRootfs: true, NoNewPrivileges: true, CapDrop: []string{"ALL"},
		MemoryBytes: 64 << 20, PidsLimit: 32,
	}
	id, err := cenv.rt.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = cenv.rt.Resume(ctx, id)
		_ = cenv.rt.Remove(ctx, id, true, true)
	})
	if err := cenv.rt.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	w := &workload{id: id, out: out}
	w.waitCount(t, 3)
	return w
}

func (w *workload) read(name string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(w.out, name))
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// waitCount waits until the counter passes n.
func (w *workload) waitCount(t *testing.T, n int) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if c, ok := w.read("count"); ok && c > n {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s stopped counting at %d", w.id, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// frozen reports whether the counter stands still for 300 ms.
func (w *workload) frozen() bool {
	a, _ := w.read("count")
	time.Sleep(300 * time.Millisecond)
	b, _ := w.read("count")
	return a == b
}

func (w *workload) inspect(t *testing.T) rt.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, found, err := cenv.rt.Inspect(ctx, w.id)
	if err != nil || !found {
		t.Fatalf("inspect %s: %v %v", w.id, found, err)
	}
	return st
}

// sandboxOf preempts the workload through the adapter; the pause signal is
// SIGUSR1 sent through the engine, acknowledged by the workload writing
// pause-ack (what a plugin would do to save its state).
func (w *workload) sandboxOf() *Container {
	return &Container{Engine: cenv.rt, ID: w.id, Notifier: func(ctx context.Context, s Signal) error {
		sig, ack := "SIGUSR1", "pause-ack"
		if s == SignalResume {
			sig, ack = "SIGUSR2", "resume-ack"
		}
		_ = os.Remove(filepath.Join(w.out, ack))
		if err := cenv.rt.Kill(ctx, w.id, sig); err != nil {
			return err
		}
		for {
			if _, ok := w.read(ack); ok {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}}
}

// TestPreemptionRealContainer: a low-priority task's container is paused
// (signal, grace, engine pause) for a system task, then resumed; with
// memory tight it is destroyed instead; almost done, it is left to finish.
func TestPreemptionRealContainer(t *testing.T) {
	needDocker(t)
	var memory atomic.Value
	memory.Store(0.1)
	s, err := New(Options{Config: Config{GlobalMax: 1}, Memory: func() (float64, error) { return memory.Load().(float64), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })

	longRunning := func(finish chan struct{}) func(context.Context) error {
		return func(ctx context.Context) error {
			select {
			case <-finish:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}

	t.Run("pause and resume", func(t *testing.T) {
		w := startWorkload(t, "pause")
		finish := make(chan struct{})
		var once sync.Once
		end := func() { once.Do(func() { close(finish) }) }
		defer end()
		low := submit(t, s, Task{ID: "low-pause", Type: TestRun, Priority: 5, Template: "code-executor", Sandbox: w.sandboxOf(), Run: longRunning(finish)})
		waitState(t, low, Running)
		var sawFrozen, sawPaused atomic.Bool
		var frozenAt atomic.Int64
		high := submit(t, s, Task{ID: "high-pause", Type: Commit, Priority: 1, Template: "code-executor", Run: func(context.Context) error {
			sawPaused.Store(w.inspect(t).Paused)
			sawFrozen.Store(w.frozen())
			n, _ := w.read("count")
			frozenAt.Store(int64(n))
			return nil
		}})
		waitAll(t, high)
		if high.Info().State != Completed || !sawPaused.Load() || !sawFrozen.Load() {
			t.Fatalf("while the system task ran: paused=%v frozen=%v (%+v)", sawPaused.Load(), sawFrozen.Load(), high.Info())
		}
		ack, ok := w.read("pause-ack")
		if !ok {
			t.Fatal("PAUSE_SIGNAL never reached the workload")
		}
		// Resumed: counting again, the engine says not paused, RESUME_SIGNAL seen.
		if int64(ack) > frozenAt.Load() {
			t.Fatalf("pause-ack %d after the freeze at %d", ack, frozenAt.Load())
		}
		waitState(t, low, Running)
		c := w.waitCount(t, int(frozenAt.Load())+2)
		if w.inspect(t).Paused {
			t.Fatal("still paused")
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, ok := w.read("resume-ack"); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("RESUME_SIGNAL never reached the workload")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if in := low.Info(); in.Pauses != 1 {
			t.Fatalf("low %+v", in)
		}
		end()
		waitAll(t, low)
		if low.Info().State != Completed {
			t.Fatalf("low %+v (count %d)", low.Info(), c)
		}
	})

	t.Run("almost done: wait", func(t *testing.T) {
		w := startWorkload(t, "wait")
		finish := make(chan struct{})
		var once sync.Once
		end := func() { once.Do(func() { close(finish) }) }
		defer end()
		low := submit(t, s, Task{ID: "low-wait", Type: TestRun, Priority: 5, Template: "code-executor", MaxDuration: time.Second,
			Sandbox: w.sandboxOf(), Run: longRunning(finish)})
		waitState(t, low, Running)
		time.Sleep(900 * time.Millisecond) // past 80 % of its MaxDuration
		var lowDone atomic.Bool
		high := submit(t, s, Task{ID: "high-wait", Type: Commit, Priority: 1, Template: "code-executor", Run: func(context.Context) error {
			lowDone.Store(low.Info().State == Completed)
			return nil
		}})
		if w.frozen() || w.inspect(t).Paused || high.Info().State != Queued {
			t.Fatalf("an almost-done task was preempted: high %+v", high.Info())
		}
		end()
		waitAll(t, low, high)
		if !lowDone.Load() || low.Info().Pauses != 0 {
			t.Fatalf("the system task ran before the almost-done one finished: %+v", low.Info())
		}
	})

	t.Run("memory tight: destroy", func(t *testing.T) {
		w := startWorkload(t, "destroy")
		memory.Store(0.95)
		defer memory.Store(0.1)
		low := submit(t, s, Task{ID: "low-destroy", Type: TestRun, Priority: 4, Template: "code-executor", Sandbox: w.sandboxOf(), Run: longRunning(make(chan struct{}))})
		waitState(t, low, Running)
		high := submit(t, s, Task{ID: "high-destroy", Type: Commit, Priority: 1, Template: "code-executor", Run: func(context.Context) error { return nil }})
		waitAll(t, low, high)
		if in := low.Info(); in.State != Failed || in.Reason != "preempted: sandbox destroyed to release memory" {
			t.Fatalf("low %+v", in)
		}
		if high.Info().State != Completed {
			t.Fatalf("high %+v", high.Info())
		}
		if st := w.inspect(t); st.Running {
			t.Fatalf("destroyed container still running: %+v", st)
		}
	})
}
