package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// Context budget constants.
const (
	// AnswerReserve tokens are kept free for the model's answer.
	AnswerReserve = 4000
	// SummaryAt: summarize when the history uses this share of its budget.
	SummaryAt = 0.70
	// ToolPromptBudget bounds the tool list in the system prompt.
	ToolPromptBudget = 3000
	// SummaryTokens bounds the summary of older messages.
	SummaryTokens = 2000
	// keepRecent messages are never summarized away.
	keepRecent = 6
	// DefaultContextWindow is used when the model does not say.
	DefaultContextWindow = 128000
)

// estimator counts tokens: ~4 bytes a token, calibrated against the
// provider's reported input tokens (the ratio moves slowly and is bounded).
type estimator struct{ ratio float64 }

func newEstimator() *estimator { return &estimator{ratio: 1} }

func (e *estimator) raw(s string) int64 { return int64(len(s)+3) / 4 }

func (e *estimator) text(s string) int64 { return int64(float64(e.raw(s)) * e.ratio) }

func (e *estimator) message(m provider.Message) int64 {
	n := e.raw(m.Content) + 4
	for _, tc := range m.ToolCalls {
		n += e.raw(tc.Name) + e.raw(string(tc.Arguments)) + 4
	}
	for _, r := range m.Reasoning {
		n += e.raw(r.Text)
	}
	return int64(float64(n) * e.ratio)
}

func (e *estimator) messages(ms []provider.Message) int64 {
	var n int64
	for _, m := range ms {
		n += e.message(m)
	}
	return n
}

// calibrate adjusts the ratio from one request: estimated (with the
// current ratio) versus what the provider reported.
func (e *estimator) calibrate(estimated, reported int64) {
	if estimated <= 0 || reported <= 0 {
		return
	}
	r := e.ratio * float64(reported) / float64(estimated)
	r = min(max(r, 0.25), 4)
	e.ratio = 0.5*e.ratio + 0.5*r
}

// history is the conversation with its summary and pins.
type history struct {
	msgs []provider.Message
	// from: messages before it are represented by summary.
	from    int
	summary string
	pins    []string
	// summaries counts summary requests (for the budget event and tests).
	summaries int
}

// window returns the messages to send: the summary (as the first user
// message) and the messages since.
func (h *history) window() []provider.Message {
	out := make([]provider.Message, 0, len(h.msgs)-h.from+1)
	if h.summary != "" {
		out = append(out, provider.Message{Role: provider.RoleUser, Content: "Summary of the conversation so far (older messages were summarized to fit the context window):\n" + h.summary})
	}
	return append(out, h.msgs[h.from:]...)
}

// cut returns the index up to which messages may be folded away, keeping
// the last keepRecent messages and never separating a tool result from the
// assistant turn that called it.
func (h *history) cut() int {
	c := len(h.msgs) - keepRecent
	for c > h.from && h.msgs[c].Role == provider.RoleTool {
		c--
	}
	if c <= h.from {
		return h.from
	}
	return c
}

// dropOldest advances the window by one exchange (sliding window), keeping
// tool results with their call.
func (h *history) dropOldest() bool {
	c := h.cut()
	if c <= h.from {
		return false
	}
	h.from++
	for h.from < c && h.msgs[h.from].Role == provider.RoleTool {
		h.from++
	}
	return true
}

// summaryRequest asks the model to summarize msgs (and the previous
// summary), keeping what the rest of the task needs.
func summaryRequest(prev string, msgs []provider.Message) provider.ChatRequest {
	var b strings.Builder
	if prev != "" {
		b.WriteString("Earlier summary:\n" + prev + "\n\n")
	}
	b.WriteString("Conversation to summarize:\n")
	for _, m := range msgs {
		switch {
		case m.Role == provider.RoleTool:
			fmt.Fprintf(&b, "[tool result %s] %s\n", m.ToolCallID, textsafe.Cap(m.Content, 2000))
		case len(m.ToolCalls) > 0:
			fmt.Fprintf(&b, "[%s] %s\n", m.Role, textsafe.Cap(m.Content, 2000))
			for _, tc := range m.ToolCalls {
				args, _ := json.Marshal(tc.Arguments)
				fmt.Fprintf(&b, "  called %s %s\n", tc.Name, textsafe.Cap(string(args), 500))
			}
		default:
			fmt.Fprintf(&b, "[%s] %s\n", m.Role, textsafe.Cap(m.Content, 4000))
		}
	}
	return provider.ChatRequest{
		System: "You summarize a coding session for the assistant that continues it. Keep every decision, " +
			"every file created or changed (with what changed), every test run and its result, open problems " +
			"and the user's requests. Be concise and factual; no preamble.",
		Messages:  []provider.Message{{Role: provider.RoleUser, Content: b.String()}},
		MaxTokens: SummaryTokens,
	}
}
