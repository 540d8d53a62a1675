package supervisor

import (
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/policyext"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// pluginSets returns the kernel-side version map for a kind: every API
// version the kernel supports, each with its client shim.
func pluginSets(k base.Kind) (map[int]plugin.PluginSet, bool) {
	vs := base.SupportedAPIVersions()
	switch k {
	case base.KindTool:
		return tool.PluginSets(nil, vs), true
	case base.KindProvider:
		return provider.PluginSets(nil, vs), true
	case base.KindVCS:
		return vcs.PluginSets(nil, vs), true
	case base.KindPolicy:
		return policyext.PluginSets(nil, vs), true
	case base.KindRuntime:
		// Runtime adapters need a launcher that jails them with the engine
		// socket (sandbox.AdapterJail); the kernel itself starts its adapter
		// through sandbox.LaunchAdapter, the conformance runner through this.
		return rt.PluginSets(nil, vs), true
	}
	return nil, false
}
