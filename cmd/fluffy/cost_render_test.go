package main

import (
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/agent"
)

// The one-shot summary ends with the task's tokens and cost, or says why
// there is no cost figure.
func TestRendererShowsTheTaskCost(t *testing.T) {
	for _, c := range []struct {
		known bool
		want  string
	}{{true, "8400 tokens, $0.0192"}, {false, "8400 tokens, cost unknown (the model's prices are not in fluffy's table"}} {
		out := renderAll(false,
			agent.Event{Type: agent.EventBudget, Budget: &agent.BudgetEvent{Turns: 4, Tokens: 8400, CostUSD: 0.0192, CostKnown: c.known}},
			agent.Event{Type: agent.EventDone, Done: &agent.DoneEvent{Status: agent.StatusDone, Tokens: 8400, CostUSD: 0.0192}})
		if !strings.Contains(out, c.want) {
			t.Fatalf("known=%v: output lacks %q:\n%s", c.known, c.want, out)
		}
	}
}
