package pluginsdk

import (
	"github.com/fluffy-waffle/fluffy/plugins/policyext"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// ServeProvider serves an AI-provider plugin until the kernel disconnects.
// Consecutive text, reasoning or argument deltas that the plugin emits
// faster than they can be sent are merged into one event on the way to
// the kernel; a plugin whose events must arrive one by one implements
// provider.ExactEvents.
func ServeProvider(impl provider.Plugin, opts ...Option) {
	o := buildOptions(impl.Info().Name, opts)
	serve(provider.PluginSets(impl, o.versions), o)
}

// ServeVCS serves a VCS plugin until the kernel disconnects.
func ServeVCS(impl vcs.Plugin, opts ...Option) {
	o := buildOptions(impl.Info().Name, opts)
	serve(vcs.PluginSets(impl, o.versions), o)
}

// ServePolicy serves a policy-extension plugin until the kernel disconnects.
func ServePolicy(impl policyext.Plugin, opts ...Option) {
	o := buildOptions(impl.Info().Name, opts)
	serve(policyext.PluginSets(impl, o.versions), o)
}
