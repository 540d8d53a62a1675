package kernelapi

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// Names of the kernel's a CLI needs without importing it.
const (
	// CodeNoProvider: a task needs a provider and none is configured.
	CodeNoProvider = task.CodeNoProvider
	// SandboxNone runs plugins without an L2 sandbox (development only).
	SandboxNone = kernel.SandboxNone
	// EnvHostGoCache names the host's Go build cache for a kernel in L1.
	EnvHostGoCache = kernel.EnvHostGoCache
)

// HostGoCache is the host's Go build cache a sandbox's cache is layered
// over ("" when there is none to use).
func HostGoCache(getenv func(string) string, home, project string) string {
	return kernel.HostGoCache(getenv, home, project, "", hclog.NewNullLogger()).Path
}

// LocalOptions open a kernel inside a CLI command.
type LocalOptions struct {
	Home, Project string
	Logger        hclog.Logger
	Sandbox       string
	Getenv        func(string) string
	BuiltinDirs   []string
	// Progress hears the steps of a slow start.
	Progress func(string)
}

// Local is a kernel a CLI command opens for one job (a tool call, an MCP
// server's tool list) instead of asking the project's kernel process: it
// has its own "cli" session and is never served over IPC.
type Local struct{ k *kernel.Kernel }

// OpenLocal opens a Local kernel of o.Project.
func OpenLocal(ctx context.Context, o LocalOptions) (*Local, error) {
	k, err := kernel.Open(ctx, kernel.Options{
		Home: o.Home, Workspace: o.Project, Logger: o.Logger, SessionID: "cli", Sandbox: o.Sandbox, Getenv: o.Getenv,
		BuiltinDirs: o.BuiltinDirs, Progress: o.Progress,
	})
	if err != nil {
		return nil, err
	}
	return &Local{k: k}, nil
}

// Close stops the kernel's plugins and closes its databases.
func (l *Local) Close() { l.k.Close() }

// MCPTools starts the MCP server name and lists its tools.
func (l *Local) MCPTools(ctx context.Context, name string) ([]manifests.Tool, error) {
	return l.k.MCPTools(ctx, name)
}

// ToolReview is a call the policy sends to a person's review.
type ToolReview struct {
	Plugin, Tool string
	// Args are the call's arguments, redacted for display.
	Args json.RawMessage
	// Items are what was sent to review: the operation and the reasons.
	Items []ReviewItem
}

// ReviewItem is one operation under review.
type ReviewItem struct {
	Syscall, Path string
	Reasons       []string
}

// Reviewer answers a review: approved once, or not.
type Reviewer func(ctx context.Context, r ToolReview) (bool, error)

// ToolResult is a tool call's result, and the plugin API version it ran
// on (0 when not known).
type ToolResult struct {
	router.Result
	APIVersion int
}

// CallTool runs one tool call on the judged path of every call (schema,
// policy per path, review, the kernel's output limit, redaction, audit)
// in the "cli" session, in strict mode, as the user. review nil: a needed
// review is refused.
func (l *Local) CallTool(ctx context.Context, plugin, toolName string, args json.RawMessage, review Reviewer, progress func(tool.Progress)) ToolResult {
	sess := &router.Session{ID: "cli", Mode: "strict", Caller: "user"}
	if review != nil {
		sess.Approver = reviewer(review)
	}
	res := l.k.Router.Call(ctx, sess, router.Call{Plugin: plugin, Tool: toolName, Args: args, Progress: progress})
	out := ToolResult{Result: res}
	if st, err := l.k.Plugins.Stats(plugin); err == nil {
		out.APIVersion = st.APIVersion
	}
	return out
}

// reviewer adapts a Reviewer to the router's approver.
type reviewer Reviewer

func (f reviewer) Review(ctx context.Context, r router.ReviewRequest) (router.Approval, error) {
	tr := ToolReview{Plugin: r.Plugin, Tool: r.Tool, Args: r.Args}
	for _, it := range r.Items {
		tr.Items = append(tr.Items, ReviewItem{Syscall: it.Request.Syscall, Path: it.Request.Path, Reasons: it.Result.Reasons})
	}
	ok, err := f(ctx, tr)
	if err != nil {
		return router.Approval{}, err
	}
	return router.Approval{Approved: ok, Scope: router.ScopeOnce, By: "terminal"}, nil
}

// HomeRegistry is the plugin registry of a $FLUFFY_HOME with its changes
// recorded in the home audit log, which is opened per operation, so it
// works while kernels run.
type HomeRegistry struct {
	*registry.Registry
	home *kernel.Home
}

// OpenRegistry opens home's plugin registry; command names who changes it
// in the audit log.
func OpenRegistry(home string, log hclog.Logger, command string) (*HomeRegistry, error) {
	h, err := kernel.OpenHome(home, kernel.HomeOptions{Logger: log, Command: command})
	if err != nil {
		return nil, err
	}
	return &HomeRegistry{Registry: h.Registry(home, log), home: h}, nil
}

// Close releases the home log.
func (r *HomeRegistry) Close() error { return r.home.Close() }
