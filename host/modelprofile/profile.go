package modelprofile

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// Profile is what is known of one model. Prices are US dollars per million
// tokens; a zero price with Priced false means "not known".
type Profile struct {
	// Model is the table entry that matched (the longest known prefix of
	// the requested name), or the requested name when none did.
	Model         string
	ContextWindow int64 // tokens the model reads at most (prompt + output)
	MaxOutput     int64 // tokens one answer may hold
	PriceIn       float64
	PriceOut      float64
	// PriceCacheRead and PriceCacheWrite price the prompt tokens a provider
	// reports as read from or written to its prompt cache.
	PriceCacheRead   float64
	PriceCacheWrite  float64
	StreamsToolCalls bool
	// Known: the model is in the table (or fully described by overrides).
	Known bool
	// Priced: Cost means dollars; false when no price is known.
	Priced bool
	// Local models (Ollama, replay) cost nothing to run here.
	Local bool
}

// Cost is what usage u costs under p, in US dollars. Input tokens are the
// prompt tokens not served from a cache (both providers report them so).
func (p Profile) Cost(u provider.Usage) float64 {
	return (float64(u.InputTokens)*p.PriceIn +
		float64(u.CacheReadTokens)*p.PriceCacheRead +
		float64(u.CacheWriteTokens)*p.PriceCacheWrite +
		float64(u.OutputTokens)*p.PriceOut) / 1e6
}

// Override is a user's setting for the selected model; nil fields keep the
// table's value.
type Override struct {
	ContextWindow, MaxOutput                           *int64
	PriceIn, PriceOut, PriceCacheRead, PriceCacheWrite *float64
}

// Defaults for a model fluffy does not know: a window small enough that
// no supported model is smaller, so the context is never over-filled.
const (
	DefaultContextWindow = 32_768
	DefaultMaxOutput     = 4_096
)

// Table is the set of known models.
type Table struct{ entries map[string]Profile }

// Builtin is the table shipped with fluffy (prices as the vendors publish
// them; a user's overrides win).
func Builtin() *Table {
	t := &Table{entries: map[string]Profile{}}
	add := func(name string, ctx, out int64, in, outP, read, write float64) {
		t.entries[name] = Profile{Model: name, ContextWindow: ctx, MaxOutput: out, PriceIn: in, PriceOut: outP,
			PriceCacheRead: read, PriceCacheWrite: write, StreamsToolCalls: true, Known: true, Priced: true}
	}
	// OpenAI: cached input is billed at the cached price; there is no
	// separate cache-write charge.
	add("gpt-5", 400_000, 128_000, 1.25, 10, 0.125, 1.25)
	add("gpt-5-mini", 400_000, 128_000, 0.25, 2, 0.025, 0.25)
	add("gpt-5-nano", 400_000, 128_000, 0.05, 0.40, 0.005, 0.05)
	add("gpt-4.1", 1_047_576, 32_768, 2, 8, 0.50, 2)
	add("gpt-4.1-mini", 1_047_576, 32_768, 0.40, 1.60, 0.10, 0.40)
	add("gpt-4.1-nano", 1_047_576, 32_768, 0.10, 0.40, 0.025, 0.10)
	add("gpt-4o", 128_000, 16_384, 2.50, 10, 1.25, 2.50)
	add("gpt-4o-mini", 128_000, 16_384, 0.15, 0.60, 0.075, 0.15)
	add("o3", 200_000, 100_000, 2, 8, 0.50, 2)
	add("o3-mini", 200_000, 100_000, 1.10, 4.40, 0.55, 1.10)
	add("o4-mini", 200_000, 100_000, 1.10, 4.40, 0.275, 1.10)
	// Anthropic: cache reads at a tenth of input, 5-minute cache writes at
	// 1.25 times input.
	add("claude-opus-4-5", 200_000, 64_000, 5, 25, 0.50, 6.25)
	add("claude-opus-4-1", 200_000, 32_000, 15, 75, 1.50, 18.75)
	add("claude-opus-4", 200_000, 32_000, 15, 75, 1.50, 18.75)
	add("claude-sonnet-4-5", 200_000, 64_000, 3, 15, 0.30, 3.75)
	add("claude-sonnet-4", 200_000, 64_000, 3, 15, 0.30, 3.75)
	add("claude-3-7-sonnet", 200_000, 64_000, 3, 15, 0.30, 3.75)
	add("claude-haiku-4-5", 200_000, 64_000, 1, 5, 0.10, 1.25)
	add("claude-3-5-haiku", 200_000, 8_192, 0.80, 4, 0.08, 1)
	// Local models served by Ollama: free here; the window is the model's
	// trained one (the server's num_ctx may be smaller: see Fit).
	local := func(name string, ctx, out int64, tools bool) {
		t.entries[name] = Profile{Model: name, ContextWindow: ctx, MaxOutput: out, StreamsToolCalls: tools, Known: true, Priced: true, Local: true}
	}
	local("qwen2.5-coder", 32_768, 8_192, false)
	local("qwen3", 40_960, 8_192, true)
	local("qwen3-coder", 262_144, 65_536, true)
	local("llama3.1", 131_072, 8_192, false)
	local("llama3.2", 131_072, 8_192, false)
	local("gpt-oss", 131_072, 32_768, true)
	local("devstral", 131_072, 8_192, true)
	local("replay", 1_000_000, 128_000, true)
	return t
}

// Lookup is the profile of model, with overrides applied, and a notice for
// the user when the model is unknown (empty otherwise). local: the model is
// served from this machine (Ollama, a cassette), so a model the table does
// not price costs nothing. A name matches its longest known prefix that ends at a
// separator, so dated names ("gpt-4.1-2025-04-14",
// "claude-sonnet-4-20250514") and tags ("qwen3:8b") find their family.
func (t *Table) Lookup(model string, local bool, o Override) (Profile, string) {
	p, ok := t.match(model)
	// A known cloud model keeps its prices wherever it is reached from (a
	// proxy on localhost still forwards to a paid API).
	if local && (!ok || p.Local) {
		if !ok {
			p = Profile{Model: model, ContextWindow: DefaultContextWindow, MaxOutput: DefaultMaxOutput}
		}
		p.Local, p.Priced = true, true
		p.PriceIn, p.PriceOut, p.PriceCacheRead, p.PriceCacheWrite = 0, 0, 0, 0
	} else if !ok {
		p = Profile{Model: model, ContextWindow: DefaultContextWindow, MaxOutput: DefaultMaxOutput}
	}
	apply(&p, o)
	if !p.Known && o.PriceIn != nil && o.PriceOut != nil {
		p.Priced = true
	}
	if p.Known || o.ContextWindow != nil && p.Priced {
		return p, ""
	}
	notice := fmt.Sprintf("model %q is not in fluffy's table: assuming a %d-token context window and %d output tokens", model, p.ContextWindow, p.MaxOutput)
	if !p.Priced {
		notice += "; its cost is unknown, so a cost limit cannot act (set model_profile.price_in and model_profile.price_out, dollars per million tokens)"
	}
	return p, notice
}

func apply(p *Profile, o Override) {
	if o.ContextWindow != nil {
		p.ContextWindow = *o.ContextWindow
	}
	if o.MaxOutput != nil {
		p.MaxOutput = *o.MaxOutput
	}
	for _, f := range []struct {
		src *float64
		dst *float64
	}{{o.PriceIn, &p.PriceIn}, {o.PriceOut, &p.PriceOut}, {o.PriceCacheRead, &p.PriceCacheRead}, {o.PriceCacheWrite, &p.PriceCacheWrite}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	// A price set for input alone prices cached tokens as input.
	if o.PriceIn != nil && o.PriceCacheRead == nil && !p.Known {
		p.PriceCacheRead = *o.PriceIn
	}
	if o.PriceIn != nil && o.PriceCacheWrite == nil && !p.Known {
		p.PriceCacheWrite = *o.PriceIn
	}
}

func (t *Table) match(model string) (Profile, bool) {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndex(m, "/"); i >= 0 { // "openai/gpt-4.1" (OpenRouter style)
		m = m[i+1:]
	}
	best := ""
	for name := range t.entries {
		if (m == name || strings.HasPrefix(m, name) && strings.ContainsRune("-:@.", rune(m[len(name)]))) && len(name) > len(best) {
			best = name
		}
	}
	if best == "" {
		return Profile{}, false
	}
	p := t.entries[best]
	return p, true
}

// Models lists the table's entries, sorted by name.
func (t *Table) Models() []Profile {
	out := make([]Profile, 0, len(t.entries))
	for _, p := range t.entries {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}
