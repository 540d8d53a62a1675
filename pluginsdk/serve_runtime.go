package pluginsdk

import (
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// ServeRuntime serves a container-runtime adapter plugin. It blocks until
// the kernel disconnects; when launched by fluffy's sandbox launchers it also
// exits on its own once the kernel is gone (runtime.GuestGRPCServer), so a
// killed kernel never leaves an adapter holding the engine socket.
func ServeRuntime(impl runtime.Plugin, opts ...Option) {
	o := buildOptions(impl.Info().Name, opts)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  base.Handshake(),
		VersionedPlugins: runtime.PluginSets(impl, o.versions),
		GRPCServer:       runtime.GuestGRPCServer(nil),
		Logger:           o.logger,
	})
}
