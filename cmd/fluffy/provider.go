package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// CodeNoKey: the task's provider needs an API key and the CLI has none.
const CodeNoKey = "PROVIDER_NO_KEY"

// taskProvider is the provider and model one task runs on, resolved by
// the CLI (whose environment holds the API keys) and sent with the task,
// so the running kernel switches to it without a restart.
type taskProvider struct {
	name  string // openai, anthropic, ollama, replay
	model string // "" for replay: the cassette's
	from  string // where name came from: --provider, FLUFFY_PROVIDER, a file:line, /provider
	// config is the plugin's Configure JSON; it holds the key: it goes to
	// the kernel over its owner-only socket and nowhere else.
	config json.RawMessage
}

// label is how the REPL's prompt and /status name the provider.
func (tp taskProvider) label() string {
	if tp.model == "" {
		return tp.name
	}
	return tp.name + "/" + tp.model
}

// resolveProvider picks the provider and model of a task: provider and
// model (the REPL's /provider and /model) when set, else --provider /
// --model, FLUFFY_PROVIDER / FLUFFY_MODEL, the project's config, the
// user's. A provider that needs a key and has none fails here, before any
// request, naming the variable to set.
func resolveProvider(e *env, cfg *config.Config, provider, model string) (taskProvider, error) {
	tp := taskProvider{name: provider, from: "/provider"}
	if tp.name == "" {
		v := cfg.Get("provider")
		tp.name, tp.from = v.Raw, v.Origin
	}
	if tp.name == "" {
		return tp, noProviderErr()
	}
	if !slices.Contains(config.ProviderNames(), tp.name) {
		return tp, uerr.New("USAGE", fmt.Sprintf("unknown provider %q", safeLine(tp.name, 40)), "fluffy ships the providers "+strings.Join(config.ProviderNames(), ", "),
			"name one of them (`fluffy init` lists what each needs)")
	}
	tp.model = model
	if tp.model == "" {
		tp.model = kernelapi.ModelFor(cfg, tp.name, provider != "")
	}
	if v := kernelapi.KeyVar(tp.name); v != "" {
		key, err := kernelapi.ProviderKey(e.getenv, cfg, tp.name)
		if err != nil {
			return tp, err
		}
		if key == "" {
			return tp, noKeyErr(tp.name)
		}
	}
	b, err := kernelapi.ProviderConfig(e.getenv, cfg, tp.name, tp.model)
	if err != nil {
		return tp, err
	}
	tp.config = b
	return tp, nil
}

func noKeyErr(name string) error {
	v := kernelapi.KeyVar(name)
	return uerr.New(CodeNoKey, fmt.Sprintf("provider %s has no API key: set %s", name, v),
		fmt.Sprintf("%s is not set in this shell and providers.%s.api_key_file is empty; nothing was sent to %s", v, name, name),
		fmt.Sprintf("export %s=... in the shell that runs fluffy, or put the key in a file of mode 0600 and run `fluffy config set providers.%s.api_key_file PATH`", v, name))
}

func noProviderErr() error {
	return uerr.New(kernelapi.CodeNoProvider, "no AI provider is configured",
		"a task needs a provider to talk to a model: none was given with --provider or FLUFFY_PROVIDER, and no config file names one",
		"run `fluffy init` (it detects the project and writes .fluffy/config.yaml), or pass --provider openai|anthropic|ollama|replay; `fluffy config set provider NAME` also works")
}

// providerChoices says, one line each, what every provider needs.
func providerChoices() []string {
	return []string{
		"openai     needs OPENAI_API_KEY (or providers.openai.api_key_file)",
		"anthropic  needs ANTHROPIC_API_KEY (or providers.anthropic.api_key_file)",
		"ollama     needs a local Ollama (`ollama serve`), no key",
		"replay     plays a recorded cassette offline (providers.replay.cassette), no key",
	}
}
