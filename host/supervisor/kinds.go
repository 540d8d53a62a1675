package supervisor

import (
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// pluginSets returns the kernel-side version map for a kind: every API
// version the kernel supports, each with its client shim.
func pluginSets(k base.Kind) (map[int]plugin.PluginSet, bool) {
	vs := base.SupportedAPIVersions()
	switch k {
	case base.KindTool:
		return tool.PluginSets(nil, vs), true
	}
	return nil, false
}
