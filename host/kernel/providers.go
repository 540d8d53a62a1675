package kernel

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// configure gives spec its Configure JSON and lets its proxy reach the
// host of the configured base URL (a local Ollama, a company gateway), not
// only the manifest's hosts.
func configure(spec *supervisor.Spec, cfg []byte) {
	spec.ConfigJSON = cfg
	if hp := baseURLHost(cfg); hp != "" && !slices.Contains(spec.Network, hp) {
		spec.Network = append(slices.Clone(spec.Network), hp)
	}
}

// setManifestNet remembers a plugin's own allowlist; provMu is held.
func (k *Kernel) setManifestNet(name string, hosts []string) {
	if k.manifestNet == nil {
		k.manifestNet = map[string][]string{}
	}
	k.manifestNet[name] = slices.Clone(hosts)
}

// useProvider makes name the provider the model's calls come from and,
// when cfg is not nil, the configuration it runs with. A configuration
// that differs from the running one replaces the plugin's instance: the
// next call starts it afresh with cfg at Configure (and its proxy allowing
// cfg's base URL host instead of the old one). No task may be running.
func (k *Kernel) useProvider(name string, cfg []byte) error {
	k.provMu.Lock()
	defer k.provMu.Unlock()
	spec, ok := k.Plugins.Spec(name)
	if !ok {
		return uerr.New(task.CodeNoProvider, fmt.Sprintf("the provider plugin %s is not loaded", name),
			"it is not installed, not enabled, or was rejected", "run `fluffy plugin list`; fluffy's own providers are provider-openai, provider-anthropic and provider-replay")
	}
	k.provider = name
	if cfg == nil || bytes.Equal(spec.ConfigJSON, cfg) {
		return nil
	}
	if base, ok := k.manifestNet[name]; ok {
		spec.Network = slices.Clone(base)
	} else {
		k.setManifestNet(name, spec.Network)
	}
	configure(&spec, cfg)
	k.Plugins.Remove(name)
	if err := k.Plugins.Add(spec); err != nil {
		return err
	}
	pc := maps.Clone(k.pluginConfig)
	if pc == nil {
		pc = map[string][]byte{}
	}
	pc[name] = bytes.Clone(cfg)
	k.pluginConfig = pc
	k.log.Info("provider configured for the task", "plugin", name)
	return nil
}

// currentProvider is the provider plugin of the running (or last) task.
func (k *Kernel) currentProvider() string {
	k.provMu.Lock()
	defer k.provMu.Unlock()
	return k.provider
}

// configSecrets lists the secrets in every plugin configuration the
// kernel has handed out, so a recording can leave them out.
func (k *Kernel) configSecrets() []string {
	k.provMu.Lock()
	defer k.provMu.Unlock()
	return task.ConfigSecrets(k.pluginConfig)
}
