package kernel

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/host/mcpconfig"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// BridgePlugin is fluffy's MCP bridge: one instance of it per configured
// server runs as spec mcp-SERVER.
const BridgePlugin = "tool-mcp"

// TagMCP is the tag of every MCP server's bridge instance (with
// third_party: a server is never fluffy's own code).
const TagMCP = "mcp_server"

// mcpListBudget bounds starting a server and listing its tools.
const mcpListBudget = 2 * time.Minute

// mcpTools caches each server's listed tools for the kernel's life: the
// schemas the router validates against are the ones first listed, and a
// restarted server cannot swap them.
type mcpTools struct {
	mu    sync.Mutex
	tools map[string][]manifests.Tool // by spec name
	// failed remembers a listing that failed, so that a broken server
	// costs one failed start per mcpRetryAfter, not one per model turn.
	failed map[string]mcpFailure
}

type mcpFailure struct {
	err error
	at  time.Time
}

// mcpRetryAfter is how long a failed listing is answered from memory.
const mcpRetryAfter = time.Minute

// loadMCP adds one bridge spec per configured MCP server (project and
// user lists). A server that cannot be used is logged and left out; the
// rest still load.
func (k *Kernel) loadMCP(home, project, hostRoot string) {
	servers, err := mcpconfig.Store{Home: home, Project: project}.List()
	if err != nil {
		k.log.Warn("MCP servers not loaded", "error", err)
		return
	}
	if len(servers) == 0 {
		return
	}
	if !k.sandboxed {
		// The server is a program fluffy did not write: it runs in its
		// sandbox or not at all.
		k.log.Warn("MCP servers not loaded: this kernel runs plugins without a sandbox", "servers", len(servers))
		return
	}
	bridge, ok := k.Plugins.Spec(BridgePlugin)
	if !ok {
		k.log.Warn("MCP servers not loaded: the bridge plugin is not loaded", "plugin", BridgePlugin)
		return
	}
	for _, s := range servers {
		spec, err := mcpSpec(bridge, s, home, project, hostRoot)
		if err == nil {
			if _, taken := k.Plugins.Spec(spec.Name); taken {
				err = uerr.New("MCP_NAME_TAKEN", "plugin name "+spec.Name+" is taken", "an installed plugin has the name of this server's bridge", "remove the server and add it under another name")
			}
		}
		if err == nil {
			err = k.Plugins.Add(spec)
		}
		if err != nil {
			k.log.Warn("MCP server not loaded", "server", s.Name, "error", err)
			continue
		}
	}
}

// mcpSpec is the bridge's spec for server s: its own name, the server's
// configuration, its program mounted read-only, and the network it asks
// for (the integration-test template, which needs the policy's opt-in,
// and the proxy that allows only hosts the policy's whitelist lists).
func mcpSpec(bridge supervisor.Spec, s mcpconfig.Server, home, project, hostRoot string) (supervisor.Spec, error) {
	spec := bridge
	spec.Name, spec.Manifest = s.SpecName(), BridgePlugin
	spec.ConfigJSON = s.ConfigJSON()
	spec.Tags = []string{manifests.TagThirdParty, TagMCP}
	spec.Network = nil
	spec.Capabilities = slices.DeleteFunc(slices.Clone(spec.Capabilities), func(c string) bool { return c == sandbox.CapBuildCache })
	if len(s.Network) > 0 {
		spec.Template, spec.Network = manifests.TemplateIntegrationTest, slices.Clone(s.Network)
	}
	if s.URL != "" {
		// No program runs: the bridge alone, in the template whose only
		// way out is the proxy, allowed the URL's host alone.
		hp, err := mcpconfig.URLHost(s.URL)
		if err != nil {
			return supervisor.Spec{}, err
		}
		if err := mcpconfig.Validate(s, home, project); err != nil {
			return supervisor.Spec{}, err
		}
		spec.Template, spec.Network = manifests.TemplateAIProvider, []string{hp}
		spec.Capabilities = slices.DeleteFunc(spec.Capabilities, func(c string) bool { return c == sandbox.CapToolchain })
		return spec, nil
	}
	if s.Absolute() {
		local := s.Command
		if hostRoot != "" {
			local = filepath.Join(hostRoot, s.Command)
		}
		probe := s
		probe.Command = local
		if err := mcpconfig.Validate(probe, home, project); err != nil {
			return supervisor.Spec{}, err
		}
		spec.ReadOnly = []sandbox.Toolchain{{Path: s.Command, Local: localOrEmpty(local, s.Command)}}
	} else if err := mcpconfig.Validate(s, home, project); err != nil {
		return supervisor.Spec{}, err
	}
	return spec, nil
}

func localOrEmpty(local, path string) string {
	if local == path {
		return ""
	}
	return local
}

// mcpServerOf is the server part of mcp.SERVER.TOOL ("" if name is not one).
func mcpServerOf(name string) string {
	rest, ok := strings.CutPrefix(name, mcpconfig.ToolPrefix)
	if !ok {
		return ""
	}
	server, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	return server
}

// mcpBridge reports whether the plugin instance called name is a loaded
// MCP server's bridge: each of its tools is one tool of one server, named
// exactly by its syscall mcp.SERVER.TOOL.
func (k *Kernel) mcpBridge(name string) bool {
	if k.Plugins == nil {
		return false // no supervisor, no bridge
	}
	spec, ok := k.Plugins.Spec(name)
	return ok && spec.Manifest == BridgePlugin && strings.HasPrefix(name, mcpconfig.SpecPrefix)
}

// mcpSpecs are the loaded bridge instances, sorted.
func (k *Kernel) mcpSpecs() []supervisor.Spec {
	var out []supervisor.Spec
	for _, n := range k.Plugins.Names() {
		if !strings.HasPrefix(n, mcpconfig.SpecPrefix) {
			continue
		}
		if spec, ok := k.Plugins.Spec(n); ok && spec.Manifest == BridgePlugin {
			out = append(out, spec)
		}
	}
	return out
}

// MCPTools lists server's tools (starting it if needed), as the model sees
// them.
func (k *Kernel) MCPTools(ctx context.Context, server string) ([]manifests.Tool, error) {
	spec, ok := k.Plugins.Spec(mcpconfig.SpecPrefix + server)
	if !ok || spec.Manifest != BridgePlugin {
		return nil, uerr.New(mcpconfig.CodeNotFound, fmt.Sprintf("MCP server %q is not loaded", server),
			"it is not configured for this project or user, or it could not be loaded (see the kernel's log)", "see `fluffy mcp list`")
	}
	return k.catalog.mcpList(ctx, spec)
}

// mcpList is spec's tools: listed by the running bridge once, then kept.
// Every listed name must lie under the server's prefix, and every schema
// compiles as a manifest's would; what does not is left out and logged.
func (c *catalog) mcpList(ctx context.Context, spec supervisor.Spec) ([]manifests.Tool, error) {
	c.mcp.mu.Lock()
	defer c.mcp.mu.Unlock()
	if ts, ok := c.mcp.tools[spec.Name]; ok {
		return ts, nil
	}
	ctx, cancel := context.WithTimeout(ctx, mcpListBudget)
	defer cancel()
	if f, ok := c.mcp.failed[spec.Name]; ok && time.Since(f.at) < mcpRetryAfter {
		return nil, f.err
	}
	defs, err := c.k.Plugins.Tools(ctx, spec.Name)
	if err != nil {
		// Kept a while only: a later listing may succeed once the server
		// is fixed or the breaker closes.
		if c.mcp.failed == nil {
			c.mcp.failed = map[string]mcpFailure{}
		}
		c.mcp.failed[spec.Name] = mcpFailure{err: err, at: time.Now()}
		return nil, err
	}
	server := strings.TrimPrefix(spec.Name, mcpconfig.SpecPrefix)
	prefix := mcpconfig.ToolPrefix + server + "."
	var out []manifests.Tool
	for _, d := range defs {
		if !strings.HasPrefix(d.Name, prefix) || strings.Contains(d.Name[len(prefix):], ".") || slices.ContainsFunc(out, func(t manifests.Tool) bool { return t.Name == d.Name }) {
			c.k.log.Warn("MCP tool left out: not named under its server's prefix", "server", server, "tool", textsafe.Line(d.Name, 100))
			continue
		}
		// The description is the server's text in the model's prompt:
		// one escaped line, bounded.
		t, err := manifests.NewTool(d.Name, textsafe.Line(d.Summary, 1024), d.Parameters)
		if err != nil {
			c.k.log.Warn("MCP tool left out: its input schema does not compile", "server", server, "tool", d.Name, "error", err)
			continue
		}
		out = append(out, t)
	}
	if c.mcp.tools == nil {
		c.mcp.tools = map[string][]manifests.Tool{}
	}
	c.mcp.tools[spec.Name] = out
	return out, nil
}

// mcpTarget is the router's target of an mcp.SERVER.TOOL call.
func (c *catalog) mcpTarget(name string) (router.Target, error) {
	server := mcpServerOf(name)
	spec, ok := c.k.Plugins.Spec(mcpconfig.SpecPrefix + server)
	if server == "" || !ok || spec.Manifest != BridgePlugin {
		return router.Target{}, uerr.New(router.CodeUnknownTool, fmt.Sprintf("no MCP server offers %q", textsafe.Line(name, 200)),
			"MCP tools are named mcp.SERVER.TOOL after a server configured with `fluffy mcp add`", "use a tool from the tool list; `fluffy mcp list` shows the servers")
	}
	ts, err := c.mcpList(context.Background(), spec)
	if err != nil {
		return router.Target{}, err
	}
	for _, t := range ts {
		if t.Name == name {
			return router.Target{
				Plugin: spec.Name, Version: spec.Version, Kind: string(spec.Kind), Tags: spec.Tags, Hosts: spec.Network,
				Sandbox: c.k.sandboxOf(spec), Tool: t,
			}, nil
		}
	}
	return router.Target{}, uerr.New(router.CodeUnknownTool, fmt.Sprintf("MCP server %s has no tool %q", server, textsafe.Line(name, 200)),
		"the server did not list it when this session first asked", "call a tool from the tool list (`fluffy mcp tools "+server+"`)")
}

// mcpAgentTools are the MCP tools for the model's tool list; a server
// that cannot list its tools is logged and contributes none.
func (k *Kernel) mcpAgentTools() []manifests.Tool {
	var out []manifests.Tool
	for _, spec := range k.mcpSpecs() {
		ts, err := k.catalog.mcpList(context.Background(), spec)
		if err != nil {
			k.log.Warn("MCP server's tools are not offered", "server", spec.Name, "error", err)
			continue
		}
		out = append(out, ts...)
	}
	return out
}
