package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// Model runs one streamed model turn (the kernel's adapter over a provider
// plugin; a *provider.Client satisfies it). The error of a failed turn is a
// *uerr.Error; provider.RetryOf tells whether it may be retried.
type Model interface {
	Chat(ctx context.Context, req provider.ChatRequest, onEvent func(provider.Event)) error
}

// Tool is what the model is told about a tool.
type Tool struct {
	Name       string
	Summary    string
	Parameters json.RawMessage
}

// Access is what a call touches, for ordering the calls of one turn.
type Access struct {
	Reads, Writes []string
	// Exclusive calls (kernel tools that move the workflow) run alone,
	// after every earlier call of the turn and before every later one.
	Exclusive bool
}

// Tools lists the tools and runs calls: the kernel implements it over the
// router (every call goes through Router.Call).
type Tools interface {
	List() []Tool
	Access(name string, args json.RawMessage) Access
	Call(ctx context.Context, id, name string, args json.RawMessage) ToolResult
}

// ToolResult is one call's outcome as the loop needs it.
type ToolResult struct {
	OK bool
	// Output is the sanitized JSON output the model gets.
	Output    json.RawMessage
	Err       *uerr.Error
	Retryable bool
	Plugin    string
	// Target is the call's main argument for display.
	Target  string
	Summary string
	Changes []string
	// TestStatus and Failures are set for test.run (the structured run).
	TestStatus string
	Failures   []string
	Duration   time.Duration
}

// Status is the workflow position the loop shows the model.
type Status struct {
	State     string
	Mode      string
	Writable  string
	Available []string
	// Changed is how many files the session's changeset holds (changes
	// proposed and not merged), earlier tasks' included.
	Changed int
}

// Workflow is the session's workflow machine as the loop sees it.
type Workflow interface {
	Status() Status
	// Start begins a task on the user's message (idle → planning); a
	// session already in a task continues where it is.
	Start(ctx context.Context, task string) error
}

// Finish is what happens once the workflow reached review: the merge review
// (automatic or a person's), the apply, the commit.
type Finish struct {
	// Done: the task is complete (merged and committed, or nothing left).
	Done    bool
	Status  string // a Status* constant when Done
	Summary string
	Files   []string
	Commit  string
	// Feedback goes back to the model when the task continues (a
	// rejection's reason).
	Feedback string
}

// Finisher runs review, merge and commit when the workflow asks for it.
// Reached is called after every turn's tool calls; it returns the zero
// Finish when there is nothing to do in the current state.
type Finisher interface {
	Reached(ctx context.Context, emit func(Event)) (Finish, error)
}

// Limits stop a task; zero means no limit (MaxTurns defaults to 50).
type Limits struct {
	MaxTurns    int
	MaxTokens   int64
	MaxCostUSD  float64
	MaxDuration time.Duration
	// Cost prices one turn's usage in US dollars (nil: the model's prices
	// are unknown and no cost is counted, so MaxCostUSD cannot act).
	Cost func(provider.Usage) float64
}
