package kernel

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/scheduler"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// TestLightReadsSkipABusyTemplate: with code-executor's one slot held by a
// running call, a light read into a plugin whose instance is running runs
// at once; a light read that must start its instance, and a call that is
// not light, wait for the slot (the limit counts sandboxes at work).
func TestLightReadsSkipABusyTemplate(t *testing.T) {
	if router.CapToolchain != sandbox.CapToolchain {
		t.Fatalf("router.CapToolchain %q != sandbox.CapToolchain %q", router.CapToolchain, sandbox.CapToolchain)
	}
	s, err := scheduler.New(scheduler.Options{Config: scheduler.Config{GlobalMax: 4, PerTemplate: map[string]int{"code-executor": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	running := map[string]bool{"tool-fs": true}
	rs := routerScheduler{s: s, seq: new(atomic.Uint64), running: func(p string) bool { return running[p] }}
	ctx := context.Background()

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before s.Close: a failed test must not leave the slot held
	busy := make(chan error, 1)
	go func() {
		busy <- rs.Run(ctx, router.Task{Name: "tool-test/test.run c1", Plugin: "tool-test", Tool: task.ToolTestRun, Template: "code-executor",
			Run: func(context.Context) error { close(started); <-release; return nil }})
	}()
	<-started

	// A light read into the running tool-fs: not queued behind test.run.
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ran := false
	if err := rs.Run(lctx, router.Task{Name: "tool-fs/fs.read c2", Plugin: "tool-fs", Tool: "fs.read", Template: "code-executor", Light: true,
		Run: func(context.Context) error { ran = true; return nil }}); err != nil || !ran {
		t.Fatalf("a light read into a running instance waited for the busy slot: ran=%v err=%v", ran, err)
	}

	// Queued behind the slot: a light read whose instance is not running
	// (its start allocates a sandbox) and a write.
	var done atomic.Int32
	waiting := make(chan error, 2)
	for _, tk := range []router.Task{
		{Name: "tool-search/search.grep c3", Plugin: "tool-search", Tool: "search.grep", Template: "code-executor", Light: true},
		{Name: "tool-fs/fs.write c4", Plugin: "tool-fs", Tool: "fs.write", Template: "code-executor"},
	} {
		tk.Run = func(context.Context) error { done.Add(1); return nil }
		go func() { waiting <- rs.Run(ctx, tk) }()
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Queued < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the two calls were not queued: %+v (ran %d)", s.Stats(), done.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := done.Load(); n != 0 {
		t.Fatalf("%d calls ran while the template's slot was busy", n)
	}
	free()
	for range 2 {
		if err := <-waiting; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-busy; err != nil || done.Load() != 2 {
		t.Fatalf("busy %v, ran %d", err, done.Load())
	}
}
