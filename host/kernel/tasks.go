package kernel

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// OpenTasks builds the task runner of the kernel's session over the
// kernel's plugins, session, databases, policy and router.
func (k *Kernel) OpenTasks(ctx context.Context, o task.Options) (*task.Tasks, error) {
	return task.Open(ctx, &task.Deps{
		Plugins: k.Plugins, Session: k.Session, ProjectDB: k.ProjectDB, Audit: k.Audit,
		Auditor: Auditor{Log: k.Audit, Logger: loggerOr(o, k)}, Policy: k.Policy, Router: k.Router,
		Workspace: k.workspace, Home: k.home, SessionMode: k.sessionMode, Logger: k.log,
		Catalog: taskCatalog{k.catalog}, KernelTools: taskKernelTools{&k.kernelTools}, Providers: taskProviders{k},
		MCPBridge: k.mcpBridge, MCPTools: k.mcpAgentTools,
		GateState: func(st func() string) { k.gateState.Store(&st) },
		Caller:    callerOf,
		Sandbox:   k.sandboxOf,
	}, o)
}

// loggerOr is the logger the runner's audit failures go to: the task's
// own when it has one.
func loggerOr(o task.Options, k *Kernel) hclog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return k.log
}

// taskCatalog is task.Catalog over the kernel's catalog.
type taskCatalog struct{ c *catalog }

func (t taskCatalog) Manifest(spec supervisor.Spec) (*manifests.Manifest, error) {
	return t.c.manifest(spec)
}

func (t taskCatalog) Lookup(plugin, name string) (router.Target, error) {
	return t.c.Lookup(plugin, name)
}

// taskKernelTools is task.KernelTools over the kernel's own tools.
type taskKernelTools struct{ kt *kernelTools }

func (t taskKernelTools) Add(name string, mt manifests.Tool, handle func(ctx context.Context, call tool.Call, caller policy.Caller) tool.Result) {
	t.kt.add(name, kernelTool{tool: mt, handle: handle})
}

func (t taskKernelTools) Get(name string) (manifests.Tool, bool) {
	kt, ok := t.kt.get(name)
	return kt.tool, ok
}

func (t taskKernelTools) Names() []string { return t.kt.names() }

// taskProviders is task.Providers over the kernel's provider state.
type taskProviders struct{ k *Kernel }

func (p taskProviders) SetProvider(name string) {
	p.k.provMu.Lock()
	p.k.provider = name
	p.k.provMu.Unlock()
}

func (p taskProviders) UseProvider(name string, cfg []byte) error { return p.k.useProvider(name, cfg) }

func (p taskProviders) Config(name string) []byte {
	p.k.provMu.Lock()
	defer p.k.provMu.Unlock()
	return p.k.pluginConfig[name]
}

func (p taskProviders) Secrets() []string          { return p.k.configSecrets() }
func (p taskProviders) ModelCaller() policy.Caller { return p.k.modelCaller() }
