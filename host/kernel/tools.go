package kernel

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/fluffy-waffle/fluffy/host/mcpconfig"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// catalog is the router's view of the tools of every loaded tool plugin:
// the declarations come from the stored manifests (never from the running
// plugin), the identity from the registry.
type catalog struct {
	k  *Kernel
	mu sync.Mutex
	// manifests caches parsed manifests by path and checksum.
	manifests map[string]*manifests.Manifest
	// loaded maps a loaded plugin's identity (specKey) to its manifest, so
	// that a call's lookup never reads the registry: an unqualified tool
	// name is looked up in every loaded tool plugin, and reading the
	// registry (a badger scan and a JSON decode per record) for each one
	// was most of the kernel's time in a warm fs.read.
	loaded map[string]*manifests.Manifest
	// mcp holds the tools MCP servers listed (mcp.go).
	mcp mcpTools
}

// specKey identifies the stored version a supervisor spec runs: its
// version, its recorded binary hash and the binary's place in the store
// (the manifest lives beside it).
func specKey(spec supervisor.Spec) string {
	return spec.Name + "\x00" + spec.Version + "\x00" + spec.SHA256 + "\x00" + spec.Binary
}

func (c *catalog) manifest(spec supervisor.Spec) (*manifests.Manifest, error) {
	sk := specKey(spec)
	c.mu.Lock()
	m, ok := c.loaded[sk]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	rec, err := c.k.Registry.Get(spec.Name)
	if err != nil {
		return nil, err
	}
	key := rec.ManifestPath + "\x00" + rec.SHA256
	c.mu.Lock()
	m, ok = c.manifests[key]
	c.mu.Unlock()
	if !ok {
		if m, err = c.k.Registry.Manifest(rec); err != nil {
			return nil, fmt.Errorf("load stored manifest of %s: %w", spec.Name, err)
		}
	}
	c.mu.Lock()
	c.manifests[key] = m
	// Remembered for the spec only when the registry's record is the
	// version the spec runs (a registry changed under a running kernel is
	// read again on every lookup, as before).
	if rec.Version == spec.Version && strings.EqualFold(rec.SHA256, spec.SHA256) {
		c.loaded[sk] = m
	}
	c.mu.Unlock()
	return m, nil
}

// Lookup implements router.Catalog.
func (c *catalog) Lookup(plugin, name string) (router.Target, error) {
	if strings.HasPrefix(name, mcpconfig.ToolPrefix) && (plugin == "" || strings.HasPrefix(plugin, mcpconfig.SpecPrefix)) {
		t, err := c.mcpTarget(name)
		if err == nil && plugin != "" && t.Plugin != plugin {
			return router.Target{}, uerr.New(router.CodeUnknownTool, fmt.Sprintf("plugin %s has no tool %q", plugin, name), "the tool belongs to "+t.Plugin, "call it without naming a plugin")
		}
		return t, err
	}
	if plugin == "" || plugin == KernelPlugin {
		if t, ok := c.k.kernelTools.target(name); ok {
			return t, nil
		}
	}
	if plugin != "" {
		spec, ok := c.k.Plugins.Spec(plugin)
		if !ok {
			return router.Target{}, c.k.notLoaded(plugin)
		}
		if spec.Kind != base.KindTool {
			return router.Target{}, uerr.New(supervisor.CodeKindUnsupported, fmt.Sprintf("plugin %s is a %s plugin, not a tool plugin", plugin, spec.Kind),
				"only tool plugins offer tools", "call a tool of a tool plugin")
		}
		return c.target(spec, name)
	}
	var found []router.Target
	for _, n := range c.k.Plugins.Names() {
		spec, ok := c.k.Plugins.Spec(n)
		if !ok || spec.Kind != base.KindTool {
			continue
		}
		if t, err := c.target(spec, name); err == nil {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return router.Target{}, uerr.New(router.CodeUnknownTool, fmt.Sprintf("no loaded plugin offers a tool named %q", name),
			"tool names are looked up among the enabled tool plugins", "use a tool listed by `fluffy plugin info PLUGIN`")
	}
	var names []string
	for _, t := range found {
		names = append(names, t.Plugin)
	}
	sort.Strings(names)
	return router.Target{}, uerr.New("TOOL_AMBIGUOUS", fmt.Sprintf("tool %q is offered by %s", name, strings.Join(names, " and ")),
		"two enabled plugins offer the same tool name", "disable one of them (`fluffy plugin disable NAME`)")
}

func (c *catalog) target(spec supervisor.Spec, name string) (router.Target, error) {
	m, err := c.manifest(spec)
	if err != nil {
		return router.Target{}, err
	}
	t, ok := m.Tool(name)
	if !ok {
		var have []string
		for _, t := range m.Tools {
			have = append(have, t.Name)
		}
		return router.Target{}, uerr.New(router.CodeUnknownTool, fmt.Sprintf("plugin %s has no tool %q", spec.Name, name),
			"its manifest declares: "+strings.Join(have, ", "), "call one of the tools the plugin declares")
	}
	return router.Target{
		Plugin: spec.Name, Version: spec.Version, Kind: string(spec.Kind), Tags: spec.Tags, Hosts: spec.Network,
		Sandbox: c.k.sandboxOf(spec), Capabilities: m.RequiredCapabilities, Tool: t,
	}, nil
}

// dispatcher runs router calls on the supervisor.
type dispatcher struct{ k *Kernel }

// Dispatch implements router.Dispatcher.
func (d dispatcher) Dispatch(ctx context.Context, plugin string, call tool.Call, progress func(tool.Progress)) (router.Dispatched, error) {
	if plugin == KernelPlugin {
		return d.k.kernelTools.dispatch(ctx, call, d.k.modelCaller())
	}
	res, info, err := d.k.Plugins.ExecuteTool(ctx, plugin, call, progress)
	return router.Dispatched{Result: res, Instance: info.InstanceID, OutDir: info.OutDir}, err
}

// sandboxOf is the L2 template a plugin runs in, or "" when this kernel
// runs plugins unsandboxed (--sandbox=none, or a test launcher).
func (k *Kernel) sandboxOf(spec supervisor.Spec) string {
	if !k.sandboxed {
		return ""
	}
	if spec.Template != "" {
		return spec.Template
	}
	return manifests.DefaultTemplate(string(spec.Kind))
}
