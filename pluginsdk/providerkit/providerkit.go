package providerkit

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// Base is a provider plugin's Info, Configure and Health over a
// configuration of type C; a plugin embeds it and adds Models and Chat.
type Base[C fmt.Stringer] struct {
	// Log is the plugin's logger (never nil after New).
	Log     hclog.Logger
	name    string
	version string
	parse   func(raw []byte) (C, error)

	mu  sync.Mutex
	cfg *C
}

// New is the Base of plugin name at version, whose Configure JSON parse
// checks and completes (defaults filled in). A nil log discards.
func New[C fmt.Stringer](name, version string, log hclog.Logger, parse func(raw []byte) (C, error)) *Base[C] {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Base[C]{Log: log, name: name, version: version, parse: parse}
}

// Info names the plugin as a provider speaking every supported API version.
func (b *Base[C]) Info() base.Info {
	return base.Info{Name: b.name, Kind: base.KindProvider, Version: b.version, APIVersions: base.SupportedAPIVersions()}
}

// Configure parses the kernel's configuration and keeps it; its String
// (which must leave secrets out) is logged.
func (b *Base[C]) Configure(_ context.Context, cfg base.Config, _ base.KernelClient) error {
	c, err := b.parse(cfg.ConfigJSON)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.cfg = &c
	b.mu.Unlock()
	b.Log.Info("configured", "config", c.String())
	return nil
}

// Health is always healthy: the upstream is judged by each turn.
func (b *Base[C]) Health(context.Context) error { return nil }

// Config is the configuration Configure kept.
func (b *Base[C]) Config() (C, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cfg == nil {
		var zero C
		return zero, uerr.New(provider.CodeConfig, b.name+" is not configured", "Configure was not called", "this is a bug in the kernel")
	}
	return *b.cfg, nil
}

// Turn is what one streamed turn needs from the plugin.
type Turn struct {
	// Model is used when the request names none.
	Model string
	// Encode builds the request body once, for every attempt.
	Encode func(model string, names *provider.ToolNames) ([]byte, error)
	// Attempt sends body once and streams the answer into s.
	Attempt func(ctx context.Context, body []byte, s *provider.Stream) error
	// Retry runs attempt again while it fails and has delivered nothing
	// (attempt reports whether it delivered).
	Retry func(ctx context.Context, attempt func() (delivered bool, err error)) error
}

// Chat runs one turn of req: the request's tool names, its model (or
// t.Model), the body encoded once, then attempts under t.Retry, each with a
// fresh stream into send. Once ctx is done an attempt's error is ctx's.
func Chat(ctx context.Context, req provider.ChatRequest, send func(provider.Event) error, t Turn) error {
	names, err := provider.ToolNamesOf(req.Tools)
	if err != nil {
		return err
	}
	model := req.Model
	if model == "" {
		model = t.Model
	}
	body, err := t.Encode(model, names)
	if err != nil {
		return fmt.Errorf("encode the request: %w", err)
	}
	return t.Retry(ctx, func() (bool, error) {
		s := provider.NewStream(send, req.RequestID, names)
		err := t.Attempt(ctx, body, s)
		if err != nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		return s.Delivered(), err
	})
}
