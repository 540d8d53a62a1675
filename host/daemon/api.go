package daemon

import (
	"encoding/json"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
)

// The kernel's IPC methods for the CLI (params and results are JSON). The
// channel itself answers ping and ipc.cancel.
const (
	MethodStatus   = "kernel.status"
	MethodShutdown = "kernel.shutdown"
	// MethodTaskRun runs one task: its events (agent.Event) stream as IPC
	// events; the result is the final agent.DoneEvent.
	MethodTaskRun = "task.run"
	// MethodTaskAttach re-streams the running (or last) task of a session
	// from AttachParams.AfterSeq, then follows it live.
	MethodTaskAttach = "task.attach"
	MethodTaskCancel = "task.cancel"
	// MethodReviewRespond answers a review_requested event.
	MethodReviewRespond = "review.respond"
	MethodSessionStatus = "session.status"
	MethodSessionBudget = "session.budget"
	MethodSessionPin    = "session.pin"
	MethodSessionMode   = "session.mode"
	MethodSessionUndo   = "session.undo"
	MethodSessionList   = "session.list"
	MethodSessionShow   = "session.show"
	MethodSessionResume = "session.resume"
	// MethodSessionArchive archives a session (SessionParams.Force drops
	// its proposed changes); archiving the served one makes a new session
	// current and the kernel exits after answering (ArchiveResult.Restart).
	MethodSessionArchive = "session.archive"
	// MethodSessionNew makes a new, empty session current (the served one
	// is kept as it is); the kernel exits after answering.
	MethodSessionNew = "session.new"
	// MethodSessionPrompt returns the system prompt the session's next
	// model request would carry (PromptResult).
	MethodSessionPrompt = "session.prompt"
	// The audit verbs read the project's audit log, which the running
	// kernel holds open: a CLI asks it rather than opening the database.
	// MethodAuditLog answers AuditQuery with the matching records, oldest
	// first; MethodAuditVerify answers AuditVerifyParams with the chain's
	// report; MethodAuditStats with the log's counts. MethodAuditExport
	// streams the log as JSON lines in AuditChunk events and answers
	// AuditExportResult.
	MethodAuditLog    = "audit.log"
	MethodAuditVerify = "audit.verify"
	MethodAuditExport = "audit.export"
	MethodAuditStats  = "audit.stats"
)

// AuditQuery selects audit records (zero fields select everything).
type AuditQuery struct {
	Since   time.Time `json:"since,omitempty"`
	Until   time.Time `json:"until,omitempty"`
	Types   []string  `json:"types,omitempty"`
	Session string    `json:"session,omitempty"`
	// Limit keeps the newest Limit matches (0: all).
	Limit int `json:"limit,omitempty"`
}

// AuditVerifyParams: All checks every record, not only the tail.
type AuditVerifyParams struct {
	All bool `json:"all,omitempty"`
}

// AuditChunk is one piece of an export's JSON lines.
type AuditChunk struct {
	Data string `json:"data"`
}

// AuditExportResult ends an export.
type AuditExportResult struct {
	Records int `json:"records"`
}

// PromptResult is the system prompt as the model would read it.
type PromptResult struct {
	System string `json:"system"`
	// Tokens is fluffy's estimate of its size.
	Tokens int64 `json:"tokens"`
}

// TaskParams start a task.
type TaskParams struct {
	Prompt   string `json:"prompt"`
	Session  string `json:"session,omitempty"` // empty: the project's current session (created if none)
	Mode     string `json:"mode,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// ProviderConfig is the provider plugin's configuration for this task
	// (base URL, model, API key from the CLI's environment or key file).
	// It holds a secret: it travels only over the owner-only socket and is
	// never logged or audited.
	ProviderConfig json.RawMessage `json:"provider_config,omitempty"`
	// Yes auto-approves what the policy allows to be auto-approved, never
	// more.
	Yes bool `json:"yes,omitempty"`
	// Interactive: a person can answer reviews on this connection. Without
	// it (and without Yes) a needed review stops the task with a clear
	// message instead of waiting.
	Interactive bool `json:"interactive,omitempty"`
	// MaxCostUSD, when > 0, is this task's cost limit (--max-cost).
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// Record sends every provider turn as a recorded_turn event holding
	// its cassette line (`fluffy --record FILE`).
	Record bool `json:"record,omitempty"`
}

// AttachParams follow a session's task.
type AttachParams struct {
	Session  string `json:"session,omitempty"`
	AfterSeq int64  `json:"after_seq,omitempty"`
}

// CancelParams cancel a session's running task.
type CancelParams struct {
	Session string `json:"session,omitempty"`
}

// ReviewResponse answers one review.
type ReviewResponse struct {
	Session  string   `json:"session,omitempty"`
	ReviewID string   `json:"review_id"`
	Decision string   `json:"decision"` // approve, reject
	Files    []string `json:"files,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Scope    string   `json:"scope,omitempty"` // once, session, always
}

// SessionParams name a session (empty: the current one).
type SessionParams struct {
	Session string `json:"session,omitempty"`
	Text    string `json:"text,omitempty"`  // session.pin
	Mode    string `json:"mode,omitempty"`  // session.mode
	Force   bool   `json:"force,omitempty"` // session.archive
}

// ArchiveResult answers session.archive.
type ArchiveResult struct {
	Archived string   `json:"archived"`
	Dropped  []string `json:"dropped,omitempty"`
	Current  string   `json:"current"`
	// Restart: the kernel served the archived session and exits after
	// this answer; the next command starts it on Current.
	Restart bool `json:"restart,omitempty"`
}

// ResumeResult answers session.resume.
type ResumeResult struct {
	Session SessionInfo `json:"session"`
	// Restart: the kernel served another session and exits after this
	// answer; the next command starts it on the resumed one.
	Restart bool `json:"restart,omitempty"`
}

// SessionStatus answers session.status (and /status in the REPL).
type SessionStatus struct {
	Session  string   `json:"session"`
	Mode     string   `json:"mode"`
	State    string   `json:"state"`
	Writable []string `json:"writable,omitempty"`
	// Why explains what is and is not writable now, and why.
	Why      string `json:"why,omitempty"`
	Pending  int    `json:"pending_changes"`
	Running  bool   `json:"running"`
	L1       bool   `json:"l1"`
	Sandbox  string `json:"sandbox"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Budget is the last task's consumption; Debt the tech-debt budget.
	Budget *agent.BudgetEvent `json:"budget,omitempty"`
	Debt   string             `json:"debt,omitempty"`
	// Policy names the policy in force; PolicyWarning is set when the
	// project's policy file is not it (its content is not approved).
	Policy        string `json:"policy,omitempty"`
	PolicyWarning string `json:"policy_warning,omitempty"`
	// NoTasks is set when the kernel cannot run tasks (no provider
	// configured, or its configuration does not load): why, and the fix.
	NoTasks string `json:"no_tasks,omitempty"`

	// TestFiles says which files count as tests (the policy's test_paths
	// table, by language): strict mode writes these before source.
	TestFiles string `json:"test_files,omitempty"`
}

// SessionInfo is one entry of session.list.
type SessionInfo struct {
	ID       string `json:"id"`
	Created  string `json:"created"`
	Updated  string `json:"updated"`
	Mode     string `json:"mode"`
	State    string `json:"state"`
	Pending  int    `json:"pending_changes"`
	Archived bool   `json:"archived,omitempty"`
	Current  bool   `json:"current,omitempty"` // the session the kernel serves
	Title    string `json:"title,omitempty"`   // the first task's prompt, bounded
}
