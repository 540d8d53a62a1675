package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// TestAnswerEndsTheTask: a turn that ends in text with nothing proposed
// ends the task answered (exit 0, nothing changed) at once; a model that
// stops with a plan or changes in flight is still nudged twice and then
// stopped.
func TestAnswerEndsTheTask(t *testing.T) {
	type turn = func(provider.ChatRequest) []provider.Event
	for _, tc := range []struct {
		name     string
		turns    []turn
		changed  int // files already in the session's changeset
		status   string
		requests int
		nudges   int
	}{
		{"a question answered at once", []turn{text("parseConfig reads key=value lines.")}, 0, StatusAnswered, 1, 0},
		{"a question answered after reading", []turn{calls(tc{"c1", "fs.read", `{"path":"a.go"}`}), text("It returns a Config.")}, 0, StatusAnswered, 2, 0},
		{"changes proposed, not green", []turn{calls(tc{"p", "plan.complete", `{"plan":"p"}`}), calls(tc{"w", "fs.write", `{"path":"a_test.go","content":"x"}`}),
			text("Done."), text("Done."), text("Done.")}, 0, StatusStopped, 5, 2},
		{"a plan submitted, nothing written yet", []turn{calls(tc{"p", "plan.complete", `{"plan":"p"}`}), text("Next I write the test."), text("ok"), text("ok")}, 0, StatusStopped, 4, 2},
		{"an earlier task's changes still proposed", []turn{text("Looks fine."), text("ok"), text("ok")}, 1, StatusStopped, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &scripted{turns: tc.turns}
			a, _, wf, rec := newTestAgent(m, map[string]string{"a.go": "package a"})
			wf.changed = tc.changed
			done := a.Run(context.Background(), "what does parseConfig do?")
			if done.Status != tc.status || len(m.requests) != tc.requests {
				t.Fatalf("done %+v after %d requests, want %s after %d", done, len(m.requests), tc.status, tc.requests)
			}
			nudges := 0
			for _, msg := range m.requests[len(m.requests)-1].Messages {
				if msg.Role == provider.RoleUser && strings.HasPrefix(msg.Content, "Kernel: the task is not finished") {
					nudges++
				}
			}
			if nudges != tc.nudges {
				t.Fatalf("%d nudges, want %d", nudges, tc.nudges)
			}
			last := rec.evs[len(rec.evs)-1]
			if last.Type != EventDone || last.Done == nil || last.Done.Status != tc.status {
				t.Fatalf("last event %+v", last)
			}
			switch tc.status {
			case StatusAnswered:
				if ExitCode(done.Status) != 0 || done.Reason != answeredReason || !strings.Contains(done.Reason, "nothing changed") || done.Summary == "" || len(done.Files) != 0 {
					t.Fatalf("answered %+v exit %d", done, ExitCode(done.Status))
				}
			case StatusStopped:
				if ExitCode(done.Status) != 3 || !strings.Contains(done.Reason, "stopped working") {
					t.Fatalf("stopped %+v", done)
				}
			}
		})
	}
}
