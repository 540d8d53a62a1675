package agent

import "github.com/fluffy-waffle/fluffy/plugins/provider"

// TaskModel is what the next tasks know of their model: a session's tasks
// may each name another provider and model.
type TaskModel struct {
	Name string
	// ContextWindow and MaxOutput in tokens (0: the defaults).
	ContextWindow int64
	MaxOutput     int
	// Cost prices a turn's usage (nil: unknown, no cost is counted).
	Cost func(provider.Usage) float64
	// MaxCostUSD, when > 0, is this task's cost limit (--max-cost).
	MaxCostUSD float64
}

// SetModel applies m to the tasks that start after it; it waits for a
// running task to end.
func (a *Agent) SetModel(m TaskModel) {
	a.run.Lock()
	defer a.run.Unlock()
	a.o.ModelName = m.Name
	a.o.ContextWindow = m.ContextWindow
	if a.o.ContextWindow <= 0 {
		a.o.ContextWindow = DefaultContextWindow
	}
	a.o.MaxAnswerTokens = AnswerReserve
	if m.MaxOutput > 0 && m.MaxOutput < AnswerReserve {
		a.o.MaxAnswerTokens = m.MaxOutput
	}
	a.o.Limits.Cost = m.Cost
	if m.MaxCostUSD > 0 {
		a.o.Limits.MaxCostUSD = m.MaxCostUSD
	} else {
		a.o.Limits.MaxCostUSD = a.baseMaxCost
	}
}
