package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/modelprofile"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/state"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/textsafe"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// providerPlugin maps the `provider` config value to fluffy's plugin.
func providerPlugin(name string) string {
	if name == "" || strings.HasPrefix(name, "provider-") {
		return name
	}
	if name == "ollama" {
		return "provider-openai" // Ollama serves the OpenAI API
	}
	return "provider-" + name
}

// providerConfig is what a provider plugin receives at Configure: its base
// URL, model, key (read here from the environment or the key file, never
// passed through the plugin's environment) and, for replay, the cassette.
// model "" is the provider's `model` key.
func providerConfig(e *env, cfg *config.Config, name, model string) ([]byte, error) {
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
		key, err := providerKey(e, cfg, name)
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

// providerKey is the API key of provider name: its standard variable,
// else the key file; "" when neither is set.
func providerKey(e *env, cfg *config.Config, name string) (string, error) {
	key := ""
	if v := keyVar(name); v != "" {
		key = e.getenv(v)
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

// keyVar is the environment variable holding provider name's API key (""
// for providers that need none).
func keyVar(name string) string {
	switch name {
	case "openai":
		return "OPENAI_API_KEY"
	case "anthropic":
		return "ANTHROPIC_API_KEY"
	}
	return ""
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

// taskOptions are the task runner's settings from the config: its
// provider and model are the default of a task that names none.
func taskOptions(cfg *config.Config) kernel.TaskOptions {
	p := cfg.String("provider")
	model := modelFor(cfg, p, false)
	return kernel.TaskOptions{
		Provider: providerPlugin(p), Model: model,
		Limits: agent.Limits{
			MaxTurns: cfg.Int("agent.max_turns"), MaxTokens: int64(cfg.Int("agent.max_tokens")),
			MaxCostUSD: cfg.Float("agent.max_cost_usd"), MaxDuration: cfg.Duration("agent.max_duration"),
		},
		AutoMaxLines:    cfg.Int("merge.auto_max_lines"),
		ProfileOverride: profileOverride(cfg),
	}
}

// profileOverride is the user's model_profile.* settings (unset keys keep
// what fluffy's table knows of the model).
func profileOverride(cfg *config.Config) modelprofile.Override {
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

// serveTasks registers the task and session methods on the daemon. When
// the task runner could not be opened (no provider), the task methods
// answer with why, and the session methods still work where they can.
func serveTasks(d *daemon.Daemon, k *kernel.Kernel, t *kernel.Tasks, openErr error, cancelOnDisconnect bool, info func() daemon.SessionStatus) {
	need := func() error {
		if t == nil {
			return openErr
		}
		return nil
	}
	d.Handle(daemon.MethodTaskRun, func(ctx context.Context, req *ipc.Request) (any, error) {
		if err := need(); err != nil {
			return nil, err
		}
		var p daemon.TaskParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		// agent.on_disconnect: continue (default) lets the task outlive its
		// client (events keep flowing to `fluffy attach`, and the daemon
		// does not exit idle under it); cancel ends it with the connection.
		defer d.Busy()()
		k.TouchSession(p.Prompt)
		tctx := context.WithoutCancel(ctx)
		if cancelOnDisconnect {
			tctx = ctx
		}
		done, err := t.Run(tctx, kernel.TaskRequest{Prompt: p.Prompt, Yes: p.Yes, Interactive: p.Interactive, Mode: p.Mode,
			Provider: providerPlugin(p.Provider), Model: p.Model, ProviderConfig: p.ProviderConfig, Record: p.Record, MaxCostUSD: p.MaxCostUSD, ProviderName: p.Provider},
			func(ev agent.Event) { _ = req.Emit(ev) })
		if err != nil {
			return nil, err
		}
		k.SaveConversation(t.Agent().Conversation())
		return done, nil
	})
	d.Handle(daemon.MethodSessionPrompt, func(ctx context.Context, req *ipc.Request) (any, error) {
		if err := need(); err != nil {
			return nil, err
		}
		sys, n := t.Agent().SystemPrompt()
		return daemon.PromptResult{System: sys, Tokens: n}, nil
	})
	d.Handle(daemon.MethodTaskAttach, func(ctx context.Context, req *ipc.Request) (any, error) {
		if err := need(); err != nil {
			return nil, err
		}
		var p daemon.AttachParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		var last *agent.DoneEvent
		err := t.Attach(ctx, p.AfterSeq, func(ev agent.Event) {
			if ev.Done != nil {
				last = ev.Done
			}
			_ = req.Emit(ev)
		})
		if err != nil {
			return nil, err
		}
		if last == nil {
			last = &agent.DoneEvent{Status: "running", Reason: "the task is still running"}
		}
		return last, nil
	})
	d.Handle(daemon.MethodTaskCancel, func(ctx context.Context, req *ipc.Request) (any, error) {
		if err := need(); err != nil {
			return nil, err
		}
		return map[string]bool{"cancelled": true}, t.Cancel()
	})
	d.Handle(daemon.MethodReviewRespond, func(ctx context.Context, req *ipc.Request) (any, error) {
		if err := need(); err != nil {
			return nil, err
		}
		var p daemon.ReviewResponse
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		a := router.Approval{Approved: p.Decision == "approve", Scope: p.Scope, By: "user", Note: p.Reason}
		if a.Scope == "" {
			a.Scope = router.ScopeOnce
		}
		// The scope must be one the review offered (Respond checks it):
		// "always" proposes a policy.update, reviewed on its own.
		if p.Decision != "approve" && p.Decision != "reject" {
			return nil, uerr.New("REVIEW_BAD_DECISION", fmt.Sprintf("decision %q", textsafe.Line(p.Decision, 40)), "a review is answered with approve or reject", "answer /approve or /reject")
		}
		a.Files = p.Files
		return map[string]bool{"ok": true}, t.Respond(p.ReviewID, a)
	})
	d.Handle(daemon.MethodSessionStatus, func(ctx context.Context, req *ipc.Request) (any, error) {
		return info(), nil
	})
	running := func() bool { return t != nil && t.Running() }
	d.Handle(daemon.MethodSessionShow, func(ctx context.Context, req *ipc.Request) (any, error) {
		var p daemon.SessionParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		id := p.Session
		if id == "" {
			id = k.Session.ID()
		}
		sum, err := k.DescribeSession(id)
		if err != nil {
			return nil, err
		}
		hist, err := k.SessionHistory(id, 50)
		if err != nil {
			return nil, err
		}
		out := map[string]any{"session": sessionInfo(sum), "history": hist}
		var conv agent.Conversation
		if sum.Current && t != nil {
			out["status"], out["workflow"] = info(), t.Machine().Status()
			conv = t.Agent().Conversation()
		} else {
			if sum.Current {
				out["status"] = info()
			}
			if conv, err = k.SavedConversation(id); err != nil {
				return nil, err
			}
		}
		out["conversation"] = map[string]any{"messages": len(conv.Messages), "summarized": conv.Summary != "", "pins": conv.Pins}
		return out, nil
	})
	d.Handle(daemon.MethodSessionList, func(ctx context.Context, req *ipc.Request) (any, error) {
		all, err := k.ListSessions()
		if err != nil {
			return nil, err
		}
		out := make([]daemon.SessionInfo, 0, len(all))
		for _, s := range all {
			out = append(out, sessionInfo(s))
		}
		return out, nil
	})
	// Resuming or archiving the served session changes the project's
	// current one: the kernel (one session per process) answers, then
	// exits, and the CLI's bootstrap starts it on the new current session.
	d.Handle(daemon.MethodSessionResume, func(ctx context.Context, req *ipc.Request) (any, error) {
		var p daemon.SessionParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		sum, sw, err := k.ResumeSession(p.Session, running())
		if err != nil {
			return nil, err
		}
		if sw {
			d.Shutdown()
		}
		return daemon.ResumeResult{Session: sessionInfo(sum), Restart: sw}, nil
	})
	d.Handle(daemon.MethodSessionNew, func(ctx context.Context, req *ipc.Request) (any, error) {
		id, err := k.NewSession(running())
		if err != nil {
			return nil, err
		}
		d.Shutdown()
		return daemon.ArchiveResult{Current: id, Restart: true}, nil
	})
	d.Handle(daemon.MethodSessionArchive, func(ctx context.Context, req *ipc.Request) (any, error) {
		var p daemon.SessionParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		res, err := k.ArchiveSession(ctx, p.Session, p.Force, running())
		if err != nil {
			return nil, err
		}
		if res.Switch {
			d.Shutdown()
		}
		return daemon.ArchiveResult{Archived: res.Archived, Dropped: res.Dropped, Current: res.Current, Restart: res.Switch}, nil
	})
	d.Handle(daemon.MethodSessionUndo, func(ctx context.Context, req *ipc.Request) (any, error) {
		if t != nil && t.Running() {
			return nil, uerr.New(kernel.CodeTaskRunning, "a task is running", "/undo changes the session's proposed changes, which the running task works on", "wait for the task or cancel it first")
		}
		var last *workspace.Change
		for _, c := range k.Session.Changes() {
			if last == nil || c.Time.After(last.Time) {
				c := c
				last = &c
			}
		}
		if last == nil {
			return nil, uerr.New("UNDO_NOTHING", "there is no proposed change to drop", "the session's changeset is empty", "nothing to do")
		}
		if err := k.Session.Discard(last.Path); err != nil {
			return nil, err
		}
		return map[string]string{"path": last.Path}, nil
	})
	d.Handle(daemon.MethodSessionBudget, func(ctx context.Context, req *ipc.Request) (any, error) {
		return info(), nil
	})
	d.Handle(daemon.MethodSessionPin, func(ctx context.Context, req *ipc.Request) (any, error) {
		if err := need(); err != nil {
			return nil, err
		}
		var p daemon.SessionParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		if strings.TrimSpace(p.Text) == "" {
			return nil, uerr.New("USAGE", "nothing to pin", "/pin keeps a text in every request of the session", "type /pin TEXT")
		}
		t.Agent().Pin(p.Text)
		k.SaveConversation(t.Agent().Conversation())
		return map[string]bool{"ok": true}, nil
	})
	d.Handle(daemon.MethodSessionMode, func(ctx context.Context, req *ipc.Request) (any, error) {
		if err := need(); err != nil {
			return nil, err
		}
		var p daemon.SessionParams
		if err := decodeParams(req, &p); err != nil {
			return nil, err
		}
		if _, err := t.Machine().SetMode(ctx, state.ModeRequest{Mode: state.Mode(p.Mode), Caller: policy.Caller{Kind: "user"}, Reason: "asked in the REPL"}); err != nil {
			return nil, err
		}
		return info(), nil
	})
}

// sessionInfo is the wire form of a session summary.
func sessionInfo(s kernel.SessionSummary) daemon.SessionInfo {
	return daemon.SessionInfo{ID: s.ID, Created: s.Created.UTC().Format(time.RFC3339), Updated: s.Updated.UTC().Format(time.RFC3339),
		Mode: s.Mode, State: s.State, Pending: s.Pending, Archived: s.Archived, Current: s.Current, Title: s.Title}
}

func decodeParams(req *ipc.Request, v any) error {
	if len(req.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Params, v); err != nil {
		return uerr.Wrap(err, "IPC_BAD_PARAMS", "the parameters of "+req.Method+" are not valid", err.Error(), "use a fluffy CLI of the same version as the kernel")
	}
	return nil
}
