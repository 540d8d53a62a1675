package agent

import (
	"encoding/json"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// Event types of the one ordered stream a task produces: the
// provider stream's kinds (text and tool-call deltas, usage, done, error) plus the
// kernel's own. The REPL renders them; `--json` prints them one per line.
const (
	EventTaskStarted     = "task_started"
	EventTextDelta       = "text_delta"
	EventReasoningDelta  = "reasoning_delta"
	EventToolCallStart   = "tool_call_start" // the model began a call
	EventToolExecuting   = "tool_executing"  // the kernel dispatched it (after gate and policy)
	EventToolResult      = "tool_result"     // finished, with its end-to-end duration
	EventStateChanged    = "state_changed"
	EventReviewRequested = "review_requested"
	EventReviewResolved  = "review_resolved"
	EventBudget          = "budget"
	EventUsage           = "usage"
	EventNotice          = "notice" // kernel information for the user (progress, warnings)
	EventError           = "error"  // a problem the task survives (a retried turn, a refused call)
	EventDone            = "done"   // always the last event of a task
	// EventRecorded carries one cassette line (Recorded) of a task run
	// with recording on: the client writes it to the --record file.
	EventRecorded = "recorded_turn"
)

// Done statuses and the one-shot exit codes they map to.
const (
	StatusDone      = "done"      // exit 0
	StatusAnswered  = "answered"  // exit 0: the model answered; nothing changed
	StatusFailed    = "failed"    // exit 1
	StatusStopped   = "stopped"   // exit 3: a limit (turns, tokens, cost, time, futility)
	StatusRejected  = "rejected"  // exit 4: the user rejected the change in review
	StatusCancelled = "cancelled" // exit 1 (Ctrl-C)
)

// ExitCode maps a done status to fluffy's one-shot exit code.
func ExitCode(status string) int {
	switch status {
	case StatusDone, StatusAnswered:
		return 0
	case StatusStopped:
		return 3
	case StatusRejected:
		return 4
	}
	return 1
}

// Event is one entry of a task's stream. Type says which payload is set.
// Text from the model or a plugin is untrusted: renderers escape it.
type Event struct {
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Session string    `json:"session,omitempty"`
	Task    string    `json:"task,omitempty"`
	Turn    int       `json:"turn,omitempty"`

	Text   string          `json:"text,omitempty"` // text_delta, reasoning_delta, notice
	Tool   *ToolEvent      `json:"tool,omitempty"`
	State  *StateEvent     `json:"state,omitempty"`
	Review *ReviewEvent    `json:"review,omitempty"`
	Budget *BudgetEvent    `json:"budget,omitempty"`
	Usage  *provider.Usage `json:"usage,omitempty"`
	Error  *uerr.Error     `json:"error,omitempty"`
	Done   *DoneEvent      `json:"done,omitempty"`
	// Recorded: recorded_turn, one cassette line (JSON, no newline).
	Recorded json.RawMessage `json:"recorded,omitempty"`
}

// ToolEvent describes one tool call through its life.
type ToolEvent struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Target is the call's main argument for one-line display (a path, a
	// pattern, a command), already bounded in length.
	Target string          `json:"target,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Plugin string          `json:"plugin,omitempty"`
	// DurationMS is end-to-end (IPC, gate, policy, sandbox, tool work).
	DurationMS int64       `json:"duration_ms,omitempty"`
	OK         bool        `json:"ok,omitempty"`
	Error      *uerr.Error `json:"error,omitempty"`
	// Summary is a short human line about the result ("Read 85 lines",
	// "1 failed (expected)").
	Summary string `json:"summary,omitempty"`
	// Changes lists files the call proposed (project-relative).
	Changes []string `json:"changes,omitempty"`
	// TestStatus is set for test.run: red, green, no_tests, ...
	TestStatus string `json:"test_status,omitempty"`
}

// StateEvent is a workflow transition or mode change.
type StateEvent struct {
	From   string `json:"from,omitempty"`
	To     string `json:"to"`
	Mode   string `json:"mode"`
	Reason string `json:"reason,omitempty"`
}

// ReviewEvent asks the user to decide (a merge, a tool call the policy
// sends to review, a mode change).
type ReviewEvent struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"` // merge, tool, mode, policy.update
	Summary string `json:"summary"`
	// Files: the diff of a merge review, per file.
	Files []ReviewFile `json:"files,omitempty"`
	// Scopes the user may answer with (once, session, always).
	Scopes []string `json:"scopes,omitempty"`
	// Policy is the policy change a "policy.update" review proposes; on a
	// "tool" review that offers "always", the change that answer proposes.
	Policy *PolicyChange `json:"policy,omitempty"`
	// Decision is set on review_resolved: approved, rejected, partial.
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// PolicyChange is a proposed policy.update: the canonical rules it adds
// and, once proposed, its trial run over recent recorded decisions.
type PolicyChange struct {
	// File is the policy file the change is written to.
	File string `json:"file"`
	// Rules are the added items as a person reads them (which rule gains
	// which except item, which allow rule is new).
	Rules string `json:"rules"`
	// Diff is the lines inserted into File ("+" lines).
	Diff  string       `json:"diff"`
	Trial *PolicyTrial `json:"trial,omitempty"`
}

// PolicyTrial is a proposed policy replayed over recent decisions.
type PolicyTrial struct {
	Replayed int      `json:"replayed"`
	Changes  []string `json:"changes,omitempty"`
	Breaking int      `json:"breaking"`
}

// ReviewFile is one file of a merge review.
type ReviewFile struct {
	Path     string `json:"path"`
	Added    int    `json:"added"`
	Removed  int    `json:"removed"`
	Diff     string `json:"diff,omitempty"`
	Conflict bool   `json:"conflict,omitempty"`
	Deleted  bool   `json:"deleted,omitempty"`
	Created  bool   `json:"created,omitempty"`
}

// BudgetEvent is the task's consumption against its limits (zero limit:
// none).
type BudgetEvent struct {
	Turns     int     `json:"turns"`
	MaxTurns  int     `json:"max_turns"`
	Tokens    int64   `json:"tokens"`
	MaxTokens int64   `json:"max_tokens"`
	CostUSD   float64 `json:"cost_usd,omitempty"`
	// TurnCostUSD is the last turn's share of CostUSD.
	TurnCostUSD float64 `json:"turn_cost_usd,omitempty"`
	// CostKnown: the model's prices are known, so CostUSD means dollars
	// (a local model's zero included).
	CostKnown  bool    `json:"cost_known,omitempty"`
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	ElapsedMS  int64   `json:"elapsed_ms"`
	MaxMS      int64   `json:"max_ms,omitempty"`
	// ContextTokens is the current request's estimated size.
	ContextTokens int64 `json:"context_tokens,omitempty"`
}

// DoneEvent ends a task.
type DoneEvent struct {
	Status  string   `json:"status"`
	Reason  string   `json:"reason,omitempty"`
	Summary string   `json:"summary,omitempty"`
	Files   []string `json:"files,omitempty"`
	Commit  string   `json:"commit,omitempty"`
	// CostUSD and Tokens are the whole task's.
	CostUSD float64 `json:"cost_usd,omitempty"`
	Tokens  int64   `json:"tokens,omitempty"`
}
