package pluginsdk

import (
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// Option configures Serve*.
type Option func(*serveOptions)

type serveOptions struct {
	versions []int
	logger   hclog.Logger
}

// WithAPIVersions restricts the API versions the plugin offers (default:
// every version the kind supports). Use it to keep serving an older API.
func WithAPIVersions(vs ...int) Option {
	return func(o *serveOptions) { o.versions = vs }
}

// WithLogger replaces the default JSON logger on stderr.
func WithLogger(l hclog.Logger) Option {
	return func(o *serveOptions) { o.logger = l }
}

func buildOptions(name string, opts []Option) serveOptions {
	o := serveOptions{versions: base.SupportedAPIVersions()}
	for _, f := range opts {
		f(&o)
	}
	if o.logger == nil {
		o.logger = NewLogger(name)
	}
	return o
}

// NewLogger is the logger a plugin should use: JSON lines on stderr, which
// go-plugin parses and re-emits through the kernel's hclog logger. Level
// comes from FLUFFY_PLUGIN_LOG_LEVEL (default info).
func NewLogger(name string) hclog.Logger {
	lvl := hclog.LevelFromString(os.Getenv("FLUFFY_PLUGIN_LOG_LEVEL"))
	if lvl == hclog.NoLevel {
		lvl = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      lvl,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

// serve runs go-plugin until the kernel disconnects.
func serve(sets map[int]plugin.PluginSet, o serveOptions) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  base.Handshake(),
		VersionedPlugins: sets,
		// Exits the plugin once its kernel's last connection is gone, so a
		// plugin never outlives a kernel that was killed.
		GRPCServer: rt.GuestGRPCServer(nil),
		Logger:     o.logger,
	})
}
