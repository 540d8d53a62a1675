package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	pt "github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
)

// TestREPLSwitchesProviderAndModel: in the REPL, /provider and /model
// switch the provider and model of the next task on the running kernel:
// the prompt and /status show them, and the next task reaches the fake of
// the new provider with the new model.
func TestREPLSwitchesProviderAndModel(t *testing.T) {
	needDockerCLI(t)
	fluffy := fluffyLayout(t, "provider-openai", "provider-anthropic")
	home := shortHome(t)
	oa, an := pt.New(), pt.New()
	defer oa.Close()
	defer an.Close()
	oa.Play(pt.Stream(0, pt.OpenAIRole, pt.OpenAIText("hi"), pt.OpenAIFinish("stop"), pt.OpenAIUsageChunk(19, 3, 0, 0), pt.OpenAIDone))
	an.Play(pt.AnthropicStream(0, pt.AnthropicStart(5, 0, 0), pt.AnthropicTextStart(0), pt.AnthropicText(0, "hi"), pt.AnthropicBlockStop(0), pt.AnthropicDelta("end_turn", 2), pt.AnthropicStop))
	ws := providerProject(t, fluffy, home, [][2]string{
		{"provider", "openai"}, {"providers.openai.base_url", oa.URL() + "/v1"}, {"providers.openai.model", "cfg-openai-model"},
		{"agent.max_turns", "1"},
	})
	adapter := filepath.Join(filepath.Dir(fluffy), "plugins", "runtime-docker", "runtime-docker")
	s := newTmux(t, ws, []string{"FLUFFY_HOME=" + home, "FLUFFY_RUNTIME_ADAPTER=" + adapter, "NO_COLOR=1",
		"OPENAI_API_KEY=sk-test-openai-5f1c2a9e", "ANTHROPIC_API_KEY=sk-ant-test-7d3b41c0", "ANTHROPIC_BASE_URL=" + an.URL()}, fluffy, "--l1", "none")
	s.wait(2*time.Minute, "the prompt naming the configured provider", func(sc string) bool {
		return strings.Contains(sc, "openai/cfg-openai-model [strict] [idle] > ")
	})
	s.send("/provider anthropic", "Enter")
	s.wait(time.Minute, "the switch to anthropic", func(sc string) bool {
		return strings.Contains(sc, "provider anthropic, model claude-sonnet-4-5 (provider from /provider)") &&
			strings.Contains(sc, "anthropic/claude-sonnet-4-5 [strict] [idle] > ")
	})
	s.send("/model claude-from-repl", "Enter")
	s.wait(time.Minute, "the model switch", func(sc string) bool {
		return strings.Contains(sc, "anthropic/claude-from-repl [strict] [idle] > ")
	})
	s.send("/status", "Enter")
	s.wait(time.Minute, "/status naming provider and model", func(sc string) bool {
		return strings.Count(sc, "provider anthropic, model claude-from-repl (provider from /provider)") >= 2
	})
	s.send("say hi", "Enter")
	deadline := time.Now().Add(4 * time.Minute)
	for len(an.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("anthropic got no request; the screen shows:\n%s", s.screen())
		}
		time.Sleep(300 * time.Millisecond)
	}
	if m := modelOf(t, an.Requests()[0].Body); m != "claude-from-repl" {
		t.Fatalf("anthropic was asked for model %q, want claude-from-repl", m)
	}
	if n := len(oa.Requests()); n != 0 {
		t.Fatalf("openai got %d request(s) after /provider anthropic", n)
	}
	// Back to the configured provider: its own model, not the REPL's.
	s.wait(3*time.Minute, "the prompt after the task", func(sc string) bool {
		return strings.Count(sc, "anthropic/claude-from-repl [strict] ") >= 3
	})
	s.send("/provider openai", "Enter")
	s.wait(time.Minute, "the switch back", func(sc string) bool { return strings.Contains(sc, "openai/cfg-openai-model [strict] ") })
	s.send("/provider gpt", "Enter")
	s.wait(time.Minute, "an unknown provider refused", func(sc string) bool { return strings.Contains(sc, `unknown provider "gpt"`) })
	s.send("/exit", "Enter")
	s.wait(time.Minute, "fluffy to exit", func(sc string) bool { return strings.Contains(sc, "FLUFFY-EXITED-0") })
}
