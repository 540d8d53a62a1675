package state

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/scheduler"
)

// TestPipelineOnTheScheduler: strict mode's test-first order is a
// dependency the real scheduler enforces; explore skips test generation.
func TestPipelineOnTheScheduler(t *testing.T) {
	run := func(t *testing.T, f Flow, stages []Stage, fail Stage) (map[Stage]scheduler.Info, []Stage) {
		t.Helper()
		s, err := scheduler.New(scheduler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		ids := map[Stage]string{}
		for _, st := range stages {
			ids[st] = "task-" + string(st)
		}
		deps, err := Pipeline(f, ids)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []Stage
		hs := map[Stage]*scheduler.Handle{}
		for _, st := range stages {
			id := ids[st]
			h, err := s.Submit(scheduler.Task{ID: id, Type: StageType(st), Priority: 3, Template: "ai-provider", Dependencies: deps[id],
				Run: func(context.Context) error {
					time.Sleep(5 * time.Millisecond)
					mu.Lock()
					order = append(order, st)
					mu.Unlock()
					if st == fail {
						return errors.New(string(st) + " failed")
					}
					return nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			hs[st] = h
		}
		out := map[Stage]scheduler.Info{}
		for st, h := range hs {
			<-h.Done()
			out[st] = h.Info()
		}
		return out, order
	}
	t.Run("strict: code waits for the tests", func(t *testing.T) {
		infos, order := run(t, FlowStrict, []Stage{StagePlan, StageTestGen, StageCodeGen, StageValidate}, "")
		if !slices.Equal(order, []Stage{StagePlan, StageTestGen, StageCodeGen, StageValidate}) {
			t.Fatalf("order %v", order)
		}
		for st, in := range infos {
			if in.State != scheduler.Completed {
				t.Fatalf("%s: %+v", st, in)
			}
		}
	})
	t.Run("strict: failed test generation fails the code", func(t *testing.T) {
		infos, order := run(t, FlowStrict, []Stage{StagePlan, StageTestGen, StageCodeGen, StageValidate}, StageTestGen)
		if slices.Contains(order, StageCodeGen) {
			t.Fatalf("code generated without tests: %v", order)
		}
		if in := infos[StageCodeGen]; in.State != scheduler.Failed || in.Reason != "dependency failed: task-test_gen" {
			t.Fatalf("code_gen %+v", in)
		}
		if in := infos[StageValidate]; in.Reason != "dependency failed: task-code_gen" {
			t.Fatalf("validate %+v", in)
		}
	})
	t.Run("explore: code waits only for the plan", func(t *testing.T) {
		if d, err := Pipeline(FlowExplore, map[Stage]string{StagePlan: "p", StageCodeGen: "c"}); err != nil || !slices.Equal(d["c"], []string{"p"}) {
			t.Fatalf("deps %v %v", d, err)
		}
		_, order := run(t, FlowExplore, []Stage{StagePlan, StageCodeGen, StageValidate}, "")
		if !slices.Equal(order, []Stage{StagePlan, StageCodeGen, StageValidate}) {
			t.Fatalf("order %v", order)
		}
	})
	if _, err := Pipeline(FlowStrict, map[Stage]string{StagePlan: "p", StageCodeGen: "c"}); err == nil {
		t.Fatal("strict code generation without test generation accepted")
	}
	if d, err := Pipeline(FlowStrict, map[Stage]string{StageTestGen: "t", StageCodeGen: "c", StageCommit: "x"}); err != nil || !slices.Equal(d["x"], []string{"c"}) || len(d["t"]) != 0 {
		t.Fatalf("pass-through: %v %v", d, err)
	}
}

// StageType is the scheduler task type a stage runs as: the caller that
// submits stages decides it, so this package needs no scheduler.
func StageType(s Stage) scheduler.TaskType {
	switch s {
	case StageValidate:
		return scheduler.Validate
	case StageReview:
		return scheduler.Review
	case StageCommit:
		return scheduler.Commit
	}
	return scheduler.AIGenerate
}
