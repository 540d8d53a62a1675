package modelprofile

import (
	"math"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

func ptr[T any](v T) *T { return &v }

func TestLookup(t *testing.T) {
	tab := Builtin()
	for _, c := range []struct {
		provider, model string
		o               Override
		wantModel       string
		wantCtx         int64
		wantPriced      bool
		wantNotice      string // substring; "" means no notice
	}{
		{"openai", "gpt-4.1", Override{}, "gpt-4.1", 1_047_576, true, ""},
		{"openai", "gpt-4.1-2025-04-14", Override{}, "gpt-4.1", 1_047_576, true, ""},
		{"openai", "gpt-4.1-mini", Override{}, "gpt-4.1-mini", 1_047_576, true, ""},
		{"openai", "openai/gpt-5", Override{}, "gpt-5", 400_000, true, ""},
		{"anthropic", "claude-sonnet-4-20250514", Override{}, "claude-sonnet-4", 200_000, true, ""},
		{"anthropic", "claude-sonnet-4-5", Override{}, "claude-sonnet-4-5", 200_000, true, ""},
		{"ollama", "qwen3:8b", Override{}, "qwen3", 40_960, true, ""},
		{"ollama", "mystery:7b", Override{}, "mystery:7b", DefaultContextWindow, true, "not in fluffy's table"},
		{"openai", "gpt-4.10", Override{}, "gpt-4.10", DefaultContextWindow, false, "cost is unknown"},
		{"openai", "my-finetune", Override{}, "my-finetune", DefaultContextWindow, false, "model_profile.price_in"},
		{"openai", "my-finetune", Override{ContextWindow: ptr[int64](64_000), PriceIn: ptr(1.0), PriceOut: ptr(2.0)}, "my-finetune", 64_000, true, ""},
		{"openai", "gpt-4.1", Override{ContextWindow: ptr[int64](100_000)}, "gpt-4.1", 100_000, true, ""},
	} {
		p, notice := tab.Lookup(c.model, c.provider == "ollama", c.o)
		if p.Model != c.wantModel || p.ContextWindow != c.wantCtx || p.Priced != c.wantPriced {
			t.Errorf("%s %s: got model %q ctx %d priced %v", c.provider, c.model, p.Model, p.ContextWindow, p.Priced)
		}
		if (c.wantNotice == "") != (notice == "") || !strings.Contains(notice, c.wantNotice) {
			t.Errorf("%s %s: notice %q, want one containing %q", c.provider, c.model, notice, c.wantNotice)
		}
	}
}

func TestCost(t *testing.T) {
	tab := Builtin()
	for _, c := range []struct {
		provider, model string
		u               provider.Usage
		want            float64
	}{
		// 1M fresh input + 1M output on gpt-4.1: $2 + $8.
		{"openai", "gpt-4.1", provider.Usage{InputTokens: 1e6, OutputTokens: 1e6}, 10},
		// Cached input at the cached price, not a fixed tenth of input.
		{"openai", "gpt-4.1", provider.Usage{CacheReadTokens: 1e6}, 0.50},
		// Anthropic cache writes cost 1.25x input, reads 0.1x.
		{"anthropic", "claude-sonnet-4-5", provider.Usage{CacheWriteTokens: 1e6, CacheReadTokens: 1e6}, 3.75 + 0.30},
		{"ollama", "qwen3", provider.Usage{InputTokens: 5e6, OutputTokens: 5e6}, 0},
		{"ollama", "mystery:7b", provider.Usage{InputTokens: 5e6, OutputTokens: 5e6}, 0},
		// gpt-4.1 through a proxy on this machine is still paid for.
		{"ollama", "gpt-4.1", provider.Usage{InputTokens: 1e6}, 2},
	} {
		p, _ := tab.Lookup(c.model, c.provider == "ollama", Override{})
		if got := p.Cost(c.u); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s %s %+v: cost %v, want %v", c.provider, c.model, c.u, got, c.want)
		}
	}
}
