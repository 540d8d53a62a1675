package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/units"
)

// Kind is a key's value type.
type Kind string

const (
	KindString   Kind = "string"
	KindInt      Kind = "int"
	KindBool     Kind = "bool"
	KindDuration Kind = "duration" // strict units: 30s, 5m, 500ms
	KindEnum     Kind = "enum"
	KindURL      Kind = "url"
	KindPath     Kind = "path"
	KindNumber   Kind = "number" // a decimal ≥ 0
)

// ProviderNames lists the providers fluffy ships.
func ProviderNames() []string { return []string{"openai", "anthropic", "ollama", "replay"} }

// Key declares one setting.
type Key struct {
	Name    string // dotted, e.g. "providers.openai.base_url"
	Kind    Kind
	Enum    []string // KindEnum: allowed values
	Default string
	// Env lists environment variables read for the key, strongest first.
	// Every key has FLUFFY_<NAME> (dots and dashes as underscores); some
	// also honour a tool's standard variable (OPENAI_BASE_URL).
	Env []string
	Doc string
}

// Keys returns every setting fluffy reads, in documentation order.
func Keys() []Key {
	providerNames := ProviderNames()
	ks := []Key{
		{Name: "provider", Kind: KindEnum, Enum: providerNames, Doc: "the AI provider tasks use (none set: a task needs --provider)"},
		{Name: "model", Kind: KindString, Doc: "the model; empty means the provider's `model` key"},
		{Name: "mode", Kind: KindEnum, Enum: []string{"strict", "explore", "debug"}, Default: "strict",
			Doc: "the workflow mode a session starts in; a request only: explore and debug still go through the policy (debug needs review)"},
		{Name: "l1", Kind: KindEnum, Enum: []string{"docker", "none"}, Default: "docker",
			Doc: "where the kernel runs: in an L1 container (docker) or as a local process (none)"},
		{Name: "sandbox", Kind: KindEnum, Enum: []string{"docker", "bwrap", "none"}, Default: "docker",
			Doc: "the L2 runtime plugins run in; none is for plugin development only"},
		{Name: "color", Kind: KindEnum, Enum: []string{"auto", "always", "never"}, Default: "auto",
			Doc: "colour in the terminal (NO_COLOR in the environment always wins)"},
		{Name: "log_level", Kind: KindEnum, Enum: []string{"trace", "debug", "info", "warn", "error"}, Default: "warn", Doc: "kernel and CLI log level"},
		{Name: "agent.max_turns", Kind: KindInt, Default: "50", Doc: "model turns per task before it stops (exit 3)"},
		{Name: "agent.max_tokens", Kind: KindInt, Default: "2000000", Doc: "tokens (input + output) per task before it stops"},
		{Name: "agent.max_cost_usd", Kind: KindNumber, Default: "0", Doc: "spend per task in US dollars before it stops; 0 means no cost limit"},
		{Name: "model_profile.context_window", Kind: KindInt, Doc: "tokens the selected model reads at most; empty: fluffy's table (32768 for a model it does not know)"},
		{Name: "model_profile.max_output", Kind: KindInt, Doc: "tokens one answer of the selected model may hold; empty: fluffy's table"},
		{Name: "model_profile.price_in", Kind: KindNumber, Doc: "US dollars per million input tokens of the selected model; empty: fluffy's table (a model it does not know has no price, so no cost limit acts)"},
		{Name: "model_profile.price_out", Kind: KindNumber, Doc: "US dollars per million output tokens of the selected model; empty: fluffy's table"},
		{Name: "model_profile.price_cache_read", Kind: KindNumber, Doc: "US dollars per million prompt tokens read from the provider's cache; empty: fluffy's table (price_in for a model it does not know)"},
		{Name: "model_profile.price_cache_write", Kind: KindNumber, Doc: "US dollars per million prompt tokens written to the provider's cache; empty: fluffy's table (price_in for a model it does not know)"},
		{Name: "agent.max_duration", Kind: KindDuration, Default: "30m", Doc: "wall-clock time per task before it stops"},
		{Name: "agent.on_disconnect", Kind: KindEnum, Enum: []string{"continue", "cancel"}, Default: "continue",
			Doc: "what a running task does when its CLI disconnects (continue: reattach with `fluffy attach`)"},
		{Name: "merge.auto_max_lines", Kind: KindInt, Default: "500", Doc: "largest diff (lines) merged without human review when tests pass and no sensitive path is touched"},
		{Name: "test.runner", Kind: KindEnum, Enum: []string{"auto", "go", "pytest", "node", "cargo"}, Default: "auto", Doc: "the test runner test.run uses"},
		{Name: "test.python_venv", Kind: KindPath, Doc: "a Python virtualenv outside the project that test.run uses (poetry's, a named one); it and the Python it was made from are mounted read-only; empty: .venv or venv in the project"},
		{Name: "test.timeout", Kind: KindDuration, Default: "300s", Doc: "deadline of one test run"},
		{Name: "scheduler.global_max", Kind: KindInt, Default: "4", Doc: "sandboxed tasks the scheduler runs at once, all templates together (at least 1)"},
		{Name: "scheduler.per_template.ai-provider", Kind: KindInt, Default: "2", Doc: "tasks running at once in ai-provider sandboxes (at least 1)"},
		{Name: "scheduler.per_template.code-executor", Kind: KindInt, Default: "2", Doc: "tasks running at once in code-executor sandboxes (at least 1)"},
		{Name: "scheduler.per_template.policy-sandbox", Kind: KindInt, Default: "1", Doc: "tasks running at once in policy-sandbox sandboxes (at least 1)"},
		{Name: "scheduler.age_threshold", Kind: KindDuration, Default: "30s",
			Doc: "how long a queued task waits before its priority is raised one level (never above 2)"},
	}
	defaults := map[string][2]string{ // base URL, model
		"openai":    {"https://api.openai.com/v1", "gpt-4.1"},
		"anthropic": {"https://api.anthropic.com", "claude-sonnet-4-5"},
		"ollama":    {"http://localhost:11434/v1", "qwen2.5-coder"},
	}
	std := map[string]string{"openai": "OPENAI", "anthropic": "ANTHROPIC"}
	for _, p := range providerNames {
		if p == "replay" {
			ks = append(ks, Key{Name: "providers.replay.cassette", Kind: KindPath, Doc: "the cassette provider-replay plays back"})
			continue
		}
		d := defaults[p]
		base := Key{Name: "providers." + p + ".base_url", Kind: KindURL, Default: d[0], Doc: "the " + p + " API's base URL (the kernel's proxy allows exactly this host)"}
		keyFile := Key{Name: "providers." + p + ".api_key_file", Kind: KindPath,
			Doc: "a file (mode 0600) holding the " + p + " API key; the key is never written to config"}
		if s := std[p]; s != "" {
			base.Env = []string{s + "_BASE_URL"}
		}
		ks = append(ks, base,
			Key{Name: "providers." + p + ".model", Kind: KindString, Default: d[1], Doc: "the " + p + " model used when `model` is empty"},
			keyFile)
	}
	for i := range ks {
		ks[i].Env = append([]string{EnvName(ks[i].Name)}, ks[i].Env...)
	}
	return ks
}

// EnvName is the FLUFFY_* variable of a key.
func EnvName(key string) string {
	return "FLUFFY_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

// check validates raw for k and returns a reason when it is bad.
func (k Key) check(raw string) string {
	switch k.Kind {
	case KindInt:
		if n, err := strconv.Atoi(raw); err != nil || n < 0 {
			return "not a whole number ≥ 0"
		}
	case KindBool:
		if _, err := strconv.ParseBool(raw); err != nil {
			return "not true or false"
		}
	case KindDuration:
		if _, err := units.ParseDuration(raw); err != nil {
			return units.DurationHelp + " is expected"
		}
	case KindEnum:
		for _, e := range k.Enum {
			if raw == e {
				return ""
			}
		}
		return "one of " + strings.Join(k.Enum, ", ") + " is expected"
	case KindURL:
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "an http(s) URL with a host is expected, e.g. https://api.openai.com/v1"
		}
	case KindString, KindPath:
		if strings.ContainsAny(raw, "\x00\n") {
			return "NUL and newlines are not allowed"
		}
	case KindNumber:
		if f, err := strconv.ParseFloat(raw, 64); err != nil || f < 0 {
			return "a decimal number ≥ 0 is expected, e.g. 2.50"
		}
	}
	return ""
}

func (k Key) help() string {
	s := fmt.Sprintf("%s (%s", k.Name, k.Kind)
	if k.Kind == KindEnum {
		s += ": " + strings.Join(k.Enum, "|")
	}
	if k.Default != "" {
		s += ", default " + k.Default
	}
	return s + ") — " + k.Doc
}
