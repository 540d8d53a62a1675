package task

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/brief"
	"github.com/fluffy-waffle/fluffy/host/modelprofile"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// taskModel is what the agent is told of the model a task runs on, and the
// notice for a model fluffy does not know ("" otherwise).
func (t *Tasks) taskModel(provider, providerName, model string, cfg []byte, maxCost float64) (agent.TaskModel, string) {
	var c struct {
		Model   string `json:"model"`
		BaseURL string `json:"base_url"`
	}
	if cfg == nil {
		cfg = t.k.Providers.Config(provider)
	}
	_ = json.Unmarshal(cfg, &c)
	if model == "" {
		model = c.Model
	}
	if model == "" && provider == "provider-replay" {
		model = "replay"
	}
	tab := t.o.Profiles
	if tab == nil {
		tab = modelprofile.Builtin()
	}
	p, notice := tab.Lookup(model, provider == "provider-replay" || loopback(c.BaseURL), t.o.ProfileOverride)
	m := agent.TaskModel{Name: model, ContextWindow: p.ContextWindow, MaxOutput: int(p.MaxOutput), MaxCostUSD: maxCost}
	if t.o.ContextWindow > 0 { // the kernel's own setting wins over the table
		m.ContextWindow = t.o.ContextWindow
	}
	// Ollama gives a model the server's num_ctx, not the model's window,
	// and cuts a longer prompt without a word; unless the user said what
	// the server gives (model_profile.context_window), assume its default.
	if ollama(providerName, c.BaseURL) && t.o.ProfileOverride.ContextWindow == nil && m.ContextWindow > OllamaDefaultContext {
		m.ServerWindow = OllamaDefaultContext
		m.ServerWindowFix = fmt.Sprintf("Start Ollama with OLLAMA_CONTEXT_LENGTH=%d (or give the model PARAMETER num_ctx %d in a Modelfile), then `fluffy config set model_profile.context_window %d`.",
			min(m.ContextWindow, 32768), min(m.ContextWindow, 32768), min(m.ContextWindow, 32768))
	}
	if p.Priced {
		m.Cost = p.Cost
	}
	return m, notice
}

// OllamaDefaultContext is the context Ollama gives a model when neither
// the server (OLLAMA_CONTEXT_LENGTH) nor the model's Modelfile (num_ctx)
// sets one.
const OllamaDefaultContext = 4096

// ollama: the task's provider is an Ollama server (named so, or on
// Ollama's port).
func ollama(providerName, base string) bool {
	if providerName == "ollama" {
		return true
	}
	u, err := url.Parse(base)
	return err == nil && u.Port() == "11434"
}

// loopback: a model served from this machine (Ollama on localhost, a
// local llama.cpp) costs nothing to run here.
func loopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// brief is the project's part of the system prompt for the paths touched.
func (t *Tasks) brief(touched []string) string {
	root := os.DirFS(t.k.Workspace)
	var langs []string
	for _, l := range brief.DetectLanguages(root) {
		langs = append(langs, l.String())
	}
	t.mu.Lock()
	dirty := t.dirty
	t.mu.Unlock()
	return brief.Build(brief.Options{Project: root, Touched: touched, Now: time.Now(), OS: runtime.GOOS,
		Languages: langs, Branch: brief.Branch(root), Dirty: dirty}).Text()
}

// treeDirty asks the VCS plugin whether the project has uncommitted
// changes (nil: no VCS plugin, or it did not answer in time). The brief
// tells the model; nothing is decided on it.
func (t *Tasks) treeDirty(ctx context.Context) *bool {
	if _, ok := t.k.Plugins.Spec(vcsPlugin); !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var dirty *bool
	err := t.k.Plugins.UseVCS(ctx, vcsPlugin, func(ctx context.Context, c vcs.Client, _ string) error {
		st, err := c.Status(ctx)
		if err == nil {
			d := len(st.Files) > 0
			dirty = &d
		}
		return err
	})
	if err != nil {
		t.log.Debug("the brief does not say whether the tree is dirty", "error", err)
	}
	return dirty
}
