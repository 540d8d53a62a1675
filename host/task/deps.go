package task

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// Deps is what the task runner needs of the kernel that runs it.
type Deps struct {
	Plugins   *supervisor.Supervisor
	Session   *workspace.Session
	ProjectDB *store.DB
	Audit     *audit.Log
	// Auditor trials a policy change against the recorded decisions and
	// records the change ("always").
	Auditor Auditor
	Policy  *policy.Engine
	Router  *router.Router
	// Workspace is the project root; Home is $FLUFFY_HOME (the trust pins).
	Workspace, Home string
	SessionMode     string
	Logger          hclog.Logger
	Catalog         Catalog
	KernelTools     KernelTools
	Providers       Providers
	// MCPBridge reports whether plugin is a bridge to one MCP server (nil:
	// none is); MCPTools are the tools of the MCP servers the model sees.
	MCPBridge func(plugin string) bool
	MCPTools  func() []manifests.Tool
	// GateState hands the kernel what reads the session's workflow state
	// (the policy sees it at ingest as state_machine_state).
	GateState func(state func() string)
	// Caller is who an instance of spec is to the policy; Sandbox names
	// the L2 sandbox spec runs in ("" unsandboxed).
	Caller  func(spec supervisor.Spec, instance string) policy.Caller
	Sandbox func(spec supervisor.Spec) string
}

// Auditor is the audit log as the "always" amendment uses it.
type Auditor interface {
	policy.DecisionSource
	RecordPolicyChange(ctx context.Context, c PolicyChange) error
}

// PolicyChange is one applied policy change, for the audit log.
type PolicyChange struct {
	Path                        string
	OldHash, NewHash            string // sha256 of the file before and after ("" when not known)
	Replayed, Changes, Breaking int    // the trial run
	// Via says how it was proposed ("review: always" for a review's
	// scope); Added is the canonical text it added.
	Via, Added string
	Session    string
}

// Catalog finds the manifests of loaded plugins and the tool a name means.
type Catalog interface {
	Manifest(spec supervisor.Spec) (*manifests.Manifest, error)
	Lookup(plugin, name string) (router.Target, error)
}

// KernelTools are the tools the kernel serves itself; the task runner
// registers the workflow's.
type KernelTools interface {
	Add(name string, t manifests.Tool, handle func(ctx context.Context, call tool.Call, caller policy.Caller) tool.Result)
	Get(name string) (manifests.Tool, bool)
	Names() []string
}

// Providers is the kernel's provider plugin and its configurations.
type Providers interface {
	// SetProvider names the provider plugin the model's calls come from.
	SetProvider(name string)
	// UseProvider makes name the provider and, when cfg is not nil, the
	// configuration it runs with; no task may be running.
	UseProvider(name string, cfg []byte) error
	// Config is the configuration name runs with.
	Config(name string) []byte
	// Secrets are the secret values of every plugin configuration.
	Secrets() []string
	// ModelCaller is who the model's calls come from.
	ModelCaller() policy.Caller
}
