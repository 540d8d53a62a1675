package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

const pluginName = "provider-replay"

// Config is the plugin's config JSON, sent by the kernel at Configure.
type Config struct {
	// Cassette is the cassette's text (JSON lines), at most
	// cassette.MaxBytes.
	Cassette string `json:"cassette"`
	// Model is the model id Models reports (default "replay").
	Model string `json:"model,omitempty"`
	// BuiltinCassette names a cassette shipped inside the plugin instead
	// of Cassette: "conformance" answers the conformance suite's provider
	// probes (`fluffy conformance run … --config
	// '{"builtin_cassette":"conformance"}'`).
	BuiltinCassette string `json:"builtin_cassette,omitempty"`
}

// conformanceCassette answers each provider probe of the conformance suite
// (conformance.ProbeRequest) with what the suite's fake upstream sends for
// that scenario; TestConformanceCassetteIsTheSuiteUpstream rebuilds it from
// the suite's own constants.
//
//go:embed conformance.jsonl
var conformanceCassette string

var builtinCassettes = map[string]string{"conformance": conformanceCassette}

type replay struct {
	log hclog.Logger

	mu    sync.Mutex
	cas   *cassette.Cassette
	model string
}

func newReplay(log hclog.Logger) *replay {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &replay{log: log, model: "replay"}
}

func (r *replay) Info() base.Info {
	return base.Info{Name: pluginName, Kind: base.KindProvider, Version: version, APIVersions: base.SupportedAPIVersions()}
}

// ExactEvents keeps the shim from merging deltas: a cassette's events
// reach the kernel exactly as they were recorded.
func (r *replay) ExactEvents() bool { return true }

func configError(why string) *uerr.Error {
	return uerr.New(provider.CodeConfig, "provider-replay has no usable cassette", why,
		"set providers.replay.cassette to a cassette file (docs/providers.md describes the format)")
}

// Configure parses and validates the cassette: a broken cassette fails
// here, not in the middle of a session.
func (r *replay) Configure(_ context.Context, cfg base.Config, _ base.KernelClient) error {
	var c Config
	if len(cfg.ConfigJSON) == 0 {
		return configError("the kernel sent no configuration")
	}
	if err := json.Unmarshal(cfg.ConfigJSON, &c); err != nil {
		return configError("its configuration is not JSON: " + err.Error())
	}
	if c.BuiltinCassette != "" {
		text, ok := builtinCassettes[c.BuiltinCassette]
		switch {
		case !ok:
			return configError(fmt.Sprintf("builtin_cassette %q is not one the plugin ships (it ships \"conformance\")", cassette.Shorten(c.BuiltinCassette, 40)))
		case strings.TrimSpace(c.Cassette) != "":
			return configError("the configuration holds both a cassette and builtin_cassette")
		}
		c.Cassette = text
	}
	if strings.TrimSpace(c.Cassette) == "" {
		return configError("the configuration holds no cassette")
	}
	cas, err := cassette.Parse(strings.NewReader(c.Cassette))
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cas = cas
	if c.Model != "" {
		r.model = c.Model
	}
	r.log.Info("cassette loaded", "turns", len(cas.Turns))
	return nil
}

func (r *replay) Health(context.Context) error { return nil }

func (r *replay) Models(context.Context) ([]provider.ModelInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return []provider.ModelInfo{{ID: r.model, ContextWindow: 200000, MaxOutputTokens: 32000, Tools: true, ParallelToolCalls: true, Reasoning: true}}, nil
}

// Chat sends the recorded events of the request's turn, pausing the
// turn's delay between them, and stops as soon as ctx is cancelled.
func (r *replay) Chat(ctx context.Context, req provider.ChatRequest, send func(provider.Event) error) error {
	r.mu.Lock()
	cas := r.cas
	r.mu.Unlock()
	if cas == nil {
		return configError("Configure was not called with a cassette")
	}
	t, err := cas.Match(req)
	if err != nil {
		return err
	}
	var timer *time.Timer
	for i, e := range t.Events {
		if t.DelayMS > 0 && i > 0 {
			if timer == nil {
				timer = time.NewTimer(time.Duration(t.DelayMS) * time.Millisecond)
				defer timer.Stop()
			} else {
				timer.Reset(time.Duration(t.DelayMS) * time.Millisecond)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := send(e); err != nil {
			return err
		}
	}
	return nil
}
