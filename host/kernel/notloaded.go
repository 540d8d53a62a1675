package kernel

import (
	"fmt"

	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// notLoaded explains why no instance of plugin is loaded, from what the
// registry knows: not installed, disabled (with the user's reason), or
// rejected at load (with the reason), instead of one message for all.
func (k *Kernel) notLoaded(plugin string) error {
	rec, err := k.Registry.Get(plugin)
	if err != nil {
		if uerr.HasCode(err, registry.CodeNotFound) {
			return uerr.New(supervisor.CodeUnknownPlugin, fmt.Sprintf("no plugin named %s is installed", plugin),
				"the registry has no record of it", "run `fluffy plugin list` to see installed plugins, or `fluffy plugin install PATH`")
		}
		return err
	}
	switch rec.State {
	case registry.StateDisabled:
		return uerr.New(registry.CodeDisabled, fmt.Sprintf("plugin %s is disabled", plugin),
			"it was disabled: "+rec.Reason, fmt.Sprintf("run `fluffy plugin enable %s` to use it again", plugin))
	case registry.StateRejected:
		return uerr.New(supervisor.CodeUnknownPlugin, fmt.Sprintf("plugin %s@%s is installed but was not loaded", plugin, rec.Version),
			rec.Reason, fmt.Sprintf("see `fluffy plugin info %s`; reinstall or remove it", plugin))
	}
	return uerr.New(supervisor.CodeUnknownPlugin, fmt.Sprintf("plugin %s is not loaded", plugin),
		fmt.Sprintf("it is installed (state %s) but this kernel did not load it", rec.State), "restart fluffy so it loads the plugin")
}
