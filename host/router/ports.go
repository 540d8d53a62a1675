package router

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/proposal"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// Catalog finds the tool a call names. The kernel implements it over the
// manifests of the loaded plugins.
type Catalog interface {
	// Lookup returns the tool. plugin "" means "whichever plugin offers
	// tool" (names are unique across loaded plugins). A missing tool is a
	// *uerr.Error with code CodeUnknownTool.
	Lookup(plugin, tool string) (Target, error)
}

// Target is a tool and the plugin identity the policy judges it as.
type Target struct {
	Plugin  string
	Version string
	Kind    string
	// Tags are the registry's tags (user-granted), never the manifest's.
	Tags []string
	// Hosts are the network hosts the plugin's manifest declares.
	Hosts []string
	// Sandbox is the L2 template the plugin runs in, "" when it does not
	// run sandboxed (--sandbox=none); the policy's require_sandbox sees it.
	Sandbox string
	// Capabilities are the manifest's required_capabilities.
	Capabilities []string
	// Tool is the manifest's declaration: schema, paths, output mode.
	Tool manifests.Tool
}

// Dispatcher runs a validated, allowed call on its plugin. The kernel
// implements it over host/supervisor.
type Dispatcher interface {
	Dispatch(ctx context.Context, plugin string, call tool.Call, progress func(tool.Progress)) (Dispatched, error)
}

// Dispatched is what the plugin answered and which instance answered it.
type Dispatched struct {
	Result   tool.Result
	Instance string
	// OutDir is the host directory holding the instance's output (the
	// proposed changes' artifacts are relative to it).
	OutDir string
}

// Gate is the workflow state machine's answer before every call (host/state
// implements Allowed). Allowed returns nil; a *state.ReviewRequiredError,
// which sends the call to the approver; or any other error (typically
// *state.ToolUnavailableError, or a *uerr.Error) that refuses the call with
// what the model can act on.
type Gate interface {
	// State is the current workflow state; the policy sees it as
	// state_machine_state. (An adapter over *state.Machine returns
	// Position().State.)
	State() string
	// Allowed is asked once per declared path of the call (write tells
	// whether the tool writes it), or once with path "" for a tool
	// without path arguments.
	Allowed(tool, path string, write bool) error
}

// Approver decides calls the policy sends to review (the REPL, the JSON
// event stream). It must block until a person answered or ctx ends.
type Approver interface {
	Review(ctx context.Context, r ReviewRequest) (Approval, error)
}

// ReviewRequest is what a person is asked to approve.
type ReviewRequest struct {
	CallID string
	Plugin string
	Tool   string
	// Args are the call's arguments, redacted for display.
	Args json.RawMessage
	// Items are the requests the policy sent to review, with its reasons.
	Items []Judged
	// Reasons are every reason for the review: the policy's and the
	// workflow gate's (a *state.ReviewRequiredError in debug mode).
	Reasons []string
}

// Approval scopes; the approver decides what "session" and
// "always" mean beyond this call and reports the scope it used.
const (
	ScopeOnce    = "once"
	ScopeSession = "session"
	ScopeAlways  = "always"
)

// Approval is a person's answer.
type Approval struct {
	Approved bool
	Scope    string // ScopeOnce (default), ScopeSession, ScopeAlways
	By       string // who answered (for the audit log)
	Note     string
	// Files, for a merge review, are the files approved (empty: all).
	Files []string
}

// Scheduler runs a sandboxed call as a task (host/scheduler implements it:
// priority, template concurrency limits). Run must call t.Run exactly once
// unless ctx ends first, and return its error.
type Scheduler interface {
	Run(ctx context.Context, t Task) error
}

// Task is one call submitted to the scheduler.
type Task struct {
	Name     string // "<plugin>/<tool> <call id>"
	Plugin   string
	Tool     string // the tool called (the scheduler's task type follows it)
	Template string // the plugin's L2 template ("" = not sandboxed)
	Priority int
	// Light marks a read-only call (see LightCall): when the plugin's
	// session instance is already running, the call allocates no sandbox
	// and the scheduler may run it at once, outside the template's limit.
	Light bool
	Run   func(ctx context.Context) error
}

// LightCall reports whether a call of t is a light read: it cannot change
// anything (the tool declares project paths and every one is access:
// read), it runs in the plugin's shared session instance (not lifetime
// per_call, which starts a fresh sandbox for each call), and the plugin
// runs no programs but its own code (it does not require the
// sandbox.toolchain capability: shell.exec declares only a read path, yet
// runs a compiler or a test suite). Scheduler template limits bound
// sandboxes doing heavy work; a light read multiplexed into a running
// instance is neither (docs/decisions/light-reads.md).
func LightCall(t Target) bool {
	if len(t.Tool.Paths) == 0 || t.Tool.Lifetime == manifests.LifetimePerCall {
		return false
	}
	for _, p := range t.Tool.Paths {
		if p.Write() {
			return false
		}
	}
	return !slices.Contains(t.Capabilities, CapToolchain)
}

// CapToolchain is the capability that mounts a language toolchain into a
// plugin's sandbox (sandbox.CapToolchain; the router does not import the
// sandbox package).
const CapToolchain = "sandbox.toolchain"

// Ingester takes a call's proposed changes into the session's changeset
// (host/workspace implements it). An error (e.g. STALE_FILE) becomes the
// call's error.
type Ingester interface {
	Ingest(ctx context.Context, out Output) error
}

// Output is one call's proposed changes; the type lives in host/proposal
// so the workspace can ingest it without importing the router.
type Output = proposal.Output

// PolicyEngine judges requests; *policy.Engine implements it. The router
// reads Policy() on every call, so a hot-reloaded policy applies to the next
// call.
type PolicyEngine interface {
	Evaluate(ctx context.Context, req policy.Request) policy.Result
	Policy() *policy.Policy
}

// Recorder appends audit events; *audit.Log implements it.
type Recorder interface {
	Append(ctx context.Context, ev audit.Event) (audit.Record, error)
}
