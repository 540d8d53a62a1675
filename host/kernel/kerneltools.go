package kernel

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// KernelPlugin is the plugin name of the tools the kernel serves itself
// (the workflow's plan.complete, workflow.request_exemption,
// session.set_mode): the router judges and audits them like any tool.
const KernelPlugin = registry.KernelName

// kernelTool is one tool the kernel serves.
type kernelTool struct {
	tool   manifests.Tool
	handle func(ctx context.Context, call tool.Call, caller policy.Caller) tool.Result
}

// kernelTools holds the kernel's own tools, registered by the task runner.
type kernelTools struct {
	mu    sync.RWMutex
	tools map[string]kernelTool
}

func (kt *kernelTools) add(name string, t kernelTool) {
	kt.mu.Lock()
	defer kt.mu.Unlock()
	if kt.tools == nil {
		kt.tools = map[string]kernelTool{}
	}
	kt.tools[name] = t
}

func (kt *kernelTools) get(name string) (kernelTool, bool) {
	kt.mu.RLock()
	defer kt.mu.RUnlock()
	t, ok := kt.tools[name]
	return t, ok
}

func (kt *kernelTools) names() []string {
	kt.mu.RLock()
	defer kt.mu.RUnlock()
	out := make([]string, 0, len(kt.tools))
	for n := range kt.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (kt *kernelTools) target(name string) (router.Target, bool) {
	t, ok := kt.get(name)
	if !ok {
		return router.Target{}, false
	}
	return router.Target{Plugin: KernelPlugin, Kind: KernelPlugin, Tool: t.tool}, true
}

// dispatch runs a kernel tool; the caller the workflow judges is the
// model's provider (the AI asked for it).
func (kt *kernelTools) dispatch(ctx context.Context, call tool.Call, caller policy.Caller) (router.Dispatched, error) {
	t, ok := kt.get(call.Tool)
	if !ok {
		return router.Dispatched{}, fmt.Errorf("kernel tool %q is not registered", call.Tool)
	}
	return router.Dispatched{Result: t.handle(ctx, call, caller), Instance: KernelPlugin}, nil
}

// modelCaller is who the model's calls of kernel tools come from: the
// provider plugin that produced them.
func (k *Kernel) modelCaller() policy.Caller {
	name := k.currentProvider()
	if name == "" {
		return policy.Caller{Kind: "plugin", Plugin: "model", PluginKind: "provider"}
	}
	if spec, ok := k.Plugins.Spec(name); ok {
		return callerOf(spec, "")
	}
	return policy.Caller{Kind: "plugin", Plugin: name, PluginKind: "provider"}
}
