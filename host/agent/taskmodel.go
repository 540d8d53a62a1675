package agent

import (
	"encoding/json"
	"fmt"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

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
	// ServerWindow, when > 0, is the context the server gives the model,
	// smaller than the model's own (Ollama's num_ctx): a request larger
	// than it is cut by the server without a word, so the user is told
	// before it is sent, with ServerWindowFix saying how to raise it.
	ServerWindow    int64
	ServerWindowFix string
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
	a.serverWindow, a.serverWindowFix = m.ServerWindow, m.ServerWindowFix
	if m.MaxCostUSD > 0 {
		a.o.Limits.MaxCostUSD = m.MaxCostUSD
	} else {
		a.o.Limits.MaxCostUSD = a.baseMaxCost
	}
}

// warnWindow tells the user, once a task, before a request goes out that
// is larger than the server's window.
func (a *Agent) warnWindow(t *taskRun, req provider.ChatRequest) {
	if a.serverWindow <= 0 || t.windowWarned {
		return
	}
	tools, _ := json.Marshal(req.Tools)
	n := a.est.text(req.System) + a.est.messages(req.Messages) + a.est.text(string(tools))
	if n <= a.serverWindow {
		return
	}
	t.windowWarned = true
	a.emit(Event{Type: EventNotice, Turn: t.turn, Text: fmt.Sprintf("this request is about %d tokens, more than the %d-token context the server gives %s: the server cuts what does not fit without saying so (tool definitions first). %s",
		n, a.serverWindow, a.o.ModelName, a.serverWindowFix)})
}
