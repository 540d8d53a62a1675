package supervisor

import (
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/policyext"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
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
	}
	return nil, false
}
