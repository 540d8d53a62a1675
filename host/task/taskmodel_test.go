package task

import (
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/modelprofile"
)

// What a task's agent is told of its model: the table's window and
// prices, a known cloud model priced behind a local proxy, Ollama's
// server window (unless the user set it) and the unknown-model notice.
func TestTaskModel(t *testing.T) {
	ctx32k := int64(32768)
	for _, c := range []struct {
		name, plugin, provider, model, base string
		override                            modelprofile.Override
		wantWindow, wantServer              int64
		priced                              bool
		notice                              string
	}{
		{"openai", "provider-openai", "openai", "gpt-4.1", "https://api.openai.com/v1", modelprofile.Override{}, 1_047_576, 0, true, ""},
		{"proxy on localhost", "provider-openai", "openai", "gpt-4.1", "http://127.0.0.1:4000/v1", modelprofile.Override{}, 1_047_576, 0, true, ""},
		{"ollama by name", "provider-openai", "ollama", "qwen2.5-coder:7b", "http://gpu-box:8080/v1", modelprofile.Override{}, 32768, OllamaDefaultContext, true, ""},
		{"ollama by port", "provider-openai", "", "qwen3", "http://localhost:11434/v1", modelprofile.Override{}, 40960, OllamaDefaultContext, true, ""},
		{"ollama, window set", "provider-openai", "ollama", "qwen3", "http://localhost:11434/v1", modelprofile.Override{ContextWindow: &ctx32k}, 32768, 0, true, ""},
		{"unknown cloud model", "provider-openai", "openai", "my-finetune", "https://api.example.com/v1", modelprofile.Override{}, modelprofile.DefaultContextWindow, 0, false, "cost is unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tasks := &Tasks{k: &Deps{}, o: Options{ProfileOverride: c.override}}
			m, notice := tasks.taskModel(c.plugin, c.provider, c.model, []byte(`{"base_url":"`+c.base+`"}`), 0)
			if m.ContextWindow != c.wantWindow || m.ServerWindow != c.wantServer || (m.Cost != nil) != c.priced {
				t.Fatalf("window %d server %d priced %v", m.ContextWindow, m.ServerWindow, m.Cost != nil)
			}
			if c.wantServer > 0 && !strings.Contains(m.ServerWindowFix, "OLLAMA_CONTEXT_LENGTH") {
				t.Fatalf("fix %q", m.ServerWindowFix)
			}
			if (c.notice == "") != (notice == "") || !strings.Contains(notice, c.notice) {
				t.Fatalf("notice %q, want %q", notice, c.notice)
			}
		})
	}
}
