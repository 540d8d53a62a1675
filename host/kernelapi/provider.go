package kernelapi

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/host/modelprofile"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// ProviderPlugin maps the `provider` config value to fluffy's plugin.
func ProviderPlugin(name string) string {
	if name == "" || strings.HasPrefix(name, "provider-") {
		return name
	}
	if name == "ollama" {
		return "provider-openai" // Ollama serves the OpenAI API
	}
	return "provider-" + name
}

// ProviderConfig is what a provider plugin receives at Configure: its base
// URL, model, key (read here from the environment or the key file, never
// passed through the plugin's environment) and, for replay, the cassette.
// model "" is the provider's `model` key.
func ProviderConfig(getenv func(string) string, cfg *config.Config, name, model string) ([]byte, error) {
	c := map[string]any{}
	switch name {
	case "replay":
		path := cfg.String("providers.replay.cassette")
		if path == "" {
			return nil, uerr.New("CONFIG_MISSING", "provider replay has no cassette", "providers.replay.cassette is empty",
				"set it: `fluffy config set providers.replay.cassette PATH`")
		}
		// provider-replay takes the cassette's text at Configure (it has no
		// access to the host's files); 3 MiB fits a gRPC message.
		if b, err := readBounded(path, 3<<20); err == nil {
			c["cassette"] = string(b)
		} else {
			return nil, uerr.Wrap(err, "CONFIG_INVALID", "cannot read the replay cassette "+path, err.Error(), "check providers.replay.cassette")
		}
	case "":
		return nil, nil
	default:
		c["base_url"] = cfg.String("providers." + name + ".base_url")
		c["model"] = cfg.String("providers." + name + ".model")
		key, err := ProviderKey(getenv, cfg, name)
		if err != nil {
			return nil, err
		}
		c["api_key"] = key
	}
	if model != "" {
		c["model"] = model
	}
	return json.Marshal(c)
}

// ProviderKey is the API key of provider name: its standard variable,
// else the key file; "" when neither is set.
func ProviderKey(getenv func(string) string, cfg *config.Config, name string) (string, error) {
	key := ""
	if v := KeyVar(name); v != "" {
		key = getenv(v)
	}
	if f := cfg.String("providers." + name + ".api_key_file"); key == "" && f != "" {
		b, err := readBounded(f, 16<<10)
		if err != nil {
			return "", uerr.Wrap(err, "CONFIG_INVALID", "cannot read the API key file "+f, err.Error(), "check providers."+name+".api_key_file (mode 0600)")
		}
		key = strings.TrimSpace(string(b))
	}
	return key, nil
}

// KeyVar is the environment variable holding provider name's API key (""
// for providers that need none).
func KeyVar(name string) string {
	switch name {
	case "openai":
		return "OPENAI_API_KEY"
	case "anthropic":
		return "ANTHROPIC_API_KEY"
	}
	return ""
}

// ModelFor is the model of provider p: the `model` setting when it was
// given for this provider (a flag or FLUFFY_MODEL, or a config file when
// the provider also comes from one), else providers.<p>.model. A
// `model: gpt-4.1` in the config does not follow `--provider anthropic`.
// switched: the provider was named for this task, not by the config.
func ModelFor(cfg *config.Config, p string, switched bool) string {
	if p == "" || p == "replay" {
		if m := cfg.Get("model"); m.Source == config.SourceFlag || m.Source == config.SourceEnv {
			return m.Raw
		}
		return ""
	}
	m, pv := cfg.Get("model"), cfg.Get("provider")
	explicit := m.Source == config.SourceFlag || m.Source == config.SourceEnv
	sameLayer := pv.Source != config.SourceFlag && pv.Source != config.SourceEnv && !switched
	if m.Raw != "" && (explicit || sameLayer) {
		return m.Raw
	}
	return cfg.String("providers." + p + ".model")
}

func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d allowed", path, fi.Size(), max)
	}
	b := make([]byte, fi.Size())
	_, err = f.ReadAt(b, 0)
	return b, err
}

// TaskOptions are the task runner's settings from the config: its
// provider and model are the default of a task that names none.
func TaskOptions(cfg *config.Config) task.Options {
	p := cfg.String("provider")
	model := ModelFor(cfg, p, false)
	return task.Options{
		Provider: ProviderPlugin(p), Model: model,
		Limits: agent.Limits{
			MaxTurns: cfg.Int("agent.max_turns"), MaxTokens: int64(cfg.Int("agent.max_tokens")),
			MaxCostUSD: cfg.Float("agent.max_cost_usd"), MaxDuration: cfg.Duration("agent.max_duration"),
		},
		AutoMaxLines:    cfg.Int("merge.auto_max_lines"),
		ProfileOverride: ProfileOverride(cfg),
	}
}

// ProfileOverride is the user's model_profile.* settings (unset keys keep
// what fluffy's table knows of the model).
func ProfileOverride(cfg *config.Config) modelprofile.Override {
	var o modelprofile.Override
	num := func(key string) *float64 {
		if v := cfg.Get(key); v.Raw != "" && v.Source != config.SourceDefault {
			f := cfg.Float(key)
			return &f
		}
		return nil
	}
	whole := func(key string) *int64 {
		if v := cfg.Get(key); v.Raw != "" && v.Source != config.SourceDefault {
			n := int64(cfg.Int(key))
			return &n
		}
		return nil
	}
	o.ContextWindow, o.MaxOutput = whole("model_profile.context_window"), whole("model_profile.max_output")
	o.PriceIn, o.PriceOut = num("model_profile.price_in"), num("model_profile.price_out")
	o.PriceCacheRead, o.PriceCacheWrite = num("model_profile.price_cache_read"), num("model_profile.price_cache_write")
	return o
}
