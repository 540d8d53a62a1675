//go:build !race

package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/state"
	"github.com/fluffy-waffle/fluffy/host/task"
)

// An answered question leaves the session idle, so the next task starts
// afresh rather than in the middle of a plan nobody made.
func TestAnsweredQuestionLeavesTheSessionIdle(t *testing.T) {
	_, tasks, _ := taskKernel(t, "../../examples/cassettes/parseconfig-question.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var ev events
	done, err := tasks.Run(ctx, task.Request{Prompt: "what does parseConfig do?", Yes: true}, ev.add)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != agent.StatusAnswered {
		t.Fatalf("task ended %s: %s\ntools: %v", done.Status, done.Reason, ev.tools())
	}
	if st := tasks.Machine().Position().State; st != state.Idle {
		t.Fatalf("after the answer the session is %s, want idle; states: %v", st, ev.states())
	}
}
