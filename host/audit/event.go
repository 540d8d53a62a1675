package audit

import "time"

// EventType is the AuditEventType plus the kinds fluffy adds.
type EventType string

// Core event types.
const (
	EventSyscall             EventType = "syscall"
	EventToolExecute         EventType = "tool_execute"
	EventToolResult          EventType = "tool_result"
	EventStateTransition     EventType = "state_transition"
	EventPolicyUpdate        EventType = "policy_update"
	EventSessionModeChange   EventType = "session_mode_change"
	EventSandboxCreated      EventType = "sandbox_created"
	EventSandboxDestroyed    EventType = "sandbox_destroyed"
	EventSandboxFailed       EventType = "sandbox_failed"
	EventCapabilityIssued    EventType = "capability_issued"
	EventCapabilityExpired   EventType = "capability_expired"
	EventMergeApproved       EventType = "merge_approved"
	EventMergeRejected       EventType = "merge_rejected"
	EventKernelStart         EventType = "kernel_start"
	EventKernelShutdown      EventType = "kernel_shutdown"
	EventAuditStorageWarning EventType = "audit_storage_warning"
	EventAuditArchiveDeleted EventType = "audit_archive_deleted"
)

// Event types from the retention and recovery sections and from the
// policy engine.
const (
	EventAuditStorageCritical EventType = "audit_storage_critical"
	EventAuditChainBreak      EventType = "audit_chain_break"
	// EventPolicyDecision is one policy evaluation (syscall, path in
	// metadata "path", caller, decision, rule), as written before the
	// router: every evaluation is now an EventSyscall record with
	// the same fields. Kept so older logs still replay.
	EventPolicyDecision EventType = "policy_decision"
)

// IsSecurity reports whether events of type t are durable before Append
// returns (SYNC_EVENTS, plus the log's own integrity events).
func IsSecurity(t EventType) bool {
	switch t {
	case EventPolicyUpdate, EventMergeApproved, EventMergeRejected, EventSessionModeChange,
		EventCapabilityIssued, EventAuditChainBreak, EventAuditArchiveDeleted,
		EventAuditStorageCritical, EventKernelStart, EventKernelShutdown:
		return true
	}
	return false
}

// Policy decisions.
const (
	DecisionAllowed        = "allowed"
	DecisionDenied         = "denied"
	DecisionReviewRequired = "review_required"
	DecisionAllowedByToken = "allowed_by_token"
)

// SummaryLimit is the most runes an input or output summary keeps.
const SummaryLimit = 500

// Metadata keys the log itself sets.
const (
	MetaGenesis  = "genesis_ms"   // on the first record of a chain segment
	MetaFirstBad = "first_bad_id" // on audit_chain_break
	// On an audit_chain_break written after the database was found damaged
	// and moved aside: where it went, how many keys were salvaged into the
	// fresh one, and the damaged files.
	MetaStoreQuarantine = "store_quarantine"
	MetaStoreSalvaged   = "store_salvaged_keys"
	MetaStoreBadFiles   = "store_bad_files"
	MetaPath            = "path"    // conventional: the path a syscall touched
	MetaFromID          = "from_id" // on audit_archive_deleted
	MetaToID            = "to_id"   // on audit_archive_deleted
	metaReasonKey       = "reason"
)

// Event is what a caller records. The log assigns id, timestamp and hashes,
// redacts secrets from the free text, and truncates the summaries.
type Event struct {
	Type EventType
	// Security forces a durable write for a type that is otherwise buffered.
	Security       bool
	SyscallType    string
	ToolName       string
	Caller         string // plugin identity, "kernel" or "user"; default "kernel"
	SessionID      string
	SessionMode    string
	State          string // state machine state
	PolicyDecision string
	PolicyRule     string
	CapabilityID   string
	DenyReason     string
	Input          string
	Output         string
	Duration       time.Duration
	SandboxID      string
	Metadata       map[string]string
}

// Record is one stored entry (AuditEntry, plus session_id so that
// entries can be listed per session).
type Record struct {
	ID                uint64            `json:"id"`
	Timestamp         int64             `json:"timestamp"`
	PrevHash          Hash              `json:"prev_hash"`
	Hash              Hash              `json:"hash"`
	EventType         EventType         `json:"event_type"`
	SyscallType       string            `json:"syscall_type,omitempty"`
	ToolName          string            `json:"tool_name,omitempty"`
	Caller            string            `json:"caller"`
	SessionID         string            `json:"session_id,omitempty"`
	SessionMode       string            `json:"session_mode,omitempty"`
	StateMachineState string            `json:"state_machine_state,omitempty"`
	PolicyDecision    string            `json:"policy_decision,omitempty"`
	PolicyRuleName    string            `json:"policy_rule_name,omitempty"`
	CapabilityID      string            `json:"capability_id,omitempty"`
	DenyReason        string            `json:"deny_reason,omitempty"`
	InputSummary      string            `json:"input_summary,omitempty"`
	OutputSummary     string            `json:"output_summary,omitempty"`
	DurationMS        int64             `json:"duration_ms,omitempty"`
	SandboxID         string            `json:"sandbox_id,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`
}

// Time is the record's timestamp.
func (r Record) Time() time.Time { return time.UnixMilli(r.Timestamp) }
