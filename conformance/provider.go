package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance/fakes"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// ProviderConfig is the configuration the suite sends a provider plugin in
// Configure: where its upstream is, and (Cassette) the probes' answers for
// a provider that plays a cassette back instead. A provider that takes its
// endpoint from elsewhere cannot be certified. How to reach it is not configuration: the
// kernel's CONNECT proxy socket is in FLUFFY_PROXY_SOCKET, as in the
// ai-provider sandbox.
type ProviderConfig struct {
	BaseURL string `json:"base_url"`
	APIKey  string `json:"api_key"`
	// Cassette is ProbeCassette(), unless the caller's configuration has
	// its own cassette or builtin_cassette.
	Cassette string `json:"cassette,omitempty"`
}

func providerChecks() map[string]checkFunc {
	return map[string]checkFunc{
		"PROVIDER-STREAM-001":   checkProviderText,
		"PROVIDER-TOOLCALL-001": checkProviderToolCall,
		"PROVIDER-CANCEL-001":   checkProviderCancel,
		"PROVIDER-ERROR-001":    checkProviderError,
		"PROVIDER-PROXY-001":    checkProviderProxy,
	}
}

// setupProvider starts the fake upstream, the configuration pointing at
// it, and the kernel's CONNECT proxy (sandbox.StartProxy, allowing exactly
// the fake's host:port) for a plugin the suite runs as a plain process: it
// gets the proxy's socket in FLUFFY_PROXY_SOCKET as it would in its
// ai-provider sandbox, whose own proxy (the container launcher's) allows
// the same target. Every tunnel either proxy opens is counted
// (PROVIDER-PROXY-001).
func (p *probe) setupProvider() error {
	p.fake = fakes.New()
	p.onClose(p.fake.Close)
	cfg := map[string]any{}
	if len(p.r.opts.PluginConfig) > 0 {
		if err := json.Unmarshal(p.r.opts.PluginConfig, &cfg); err != nil {
			return fmt.Errorf("the plugin configuration given to the suite is not a JSON object: %w", err)
		}
	}
	// The suite's own keys win: the upstream is the fake, the key a dummy.
	cfg["base_url"], cfg["api_key"] = p.fake.URL()+"/v1", "conformance-key"
	// A provider that plays back gets the probes' answers as a cassette,
	// unless the caller chose one.
	_, cas := cfg["cassette"]
	_, builtin := cfg["builtin_cassette"]
	if !cas && !builtin {
		cfg["cassette"] = ProbeCassette()
	}
	p.configJSON, _ = json.Marshal(cfg)
	p.network = []string{p.fake.Target()}
	hub := &netHub{}
	watch := func(ev sandbox.NetworkEvent) {
		if ev.Plugin != p.m.Name {
			return
		}
		p.netMu.Lock()
		defer p.netMu.Unlock()
		switch {
		case ev.Allowed && ev.Reason == "allowed" && ev.Target == p.fake.Target():
			p.tunnels++
		case !ev.Allowed:
			p.refused = append(p.refused, ev.Target+" ("+ev.Reason+")")
		}
	}
	for _, l := range []any{hub, p.r.opts.Launcher, p.r.opts.Sandbox} {
		if w, ok := l.(networkWatcher); ok {
			p.onClose(w.WatchNetwork(watch))
		}
	}
	if _, contained := p.launcher().(networkWatcher); contained {
		return nil
	}
	px, err := sandbox.StartProxy(filepath.Join(p.dir, "proxy"), sandbox.ProxyConfig{
		Plugin: p.m.Name, Instance: "conformance", Allow: p.network, Auditor: hub, Logger: p.r.opts.Logger,
	})
	if err != nil {
		return err
	}
	p.onClose(func() { _ = px.Close() })
	p.proxyEnv = []string{rt.EnvProxySocket + "=" + px.Socket()}
	return nil
}

// tunnelCount is how many tunnels to the fake upstream the kernel's proxy
// opened for the plugin so far.
func (p *probe) tunnelCount() (int, []string) {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	return p.tunnels, slices.Clone(p.refused)
}

func (p *probe) providerBlocked() (outcome, bool) {
	if p.m != nil && p.m.Kind != manifests.KindProvider {
		return na("the plugin is a %s plugin", p.m.Kind), true
	}
	return p.blocked()
}

// ProbeRequest is the request the provider items send for a scenario of
// the fake upstream (fakes.Scenario*). Each scenario's prompt differs, so a
// provider that answers by request (provider-replay's cassette) can tell
// the probes apart; a network provider just forwards it.
func ProbeRequest(scenario string) provider.ChatRequest {
	return provider.ChatRequest{Model: "fake", MaxTokens: 64, Messages: []provider.Message{{Role: "user", Content: "conformance probe: " + scenario}},
		Tools: []provider.ToolSpec{{Name: "fs.read", Description: "read a file", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}}
}

func (p *probe) chat(ctx context.Context, scenario string, onEvent func(provider.Event)) error {
	p.fake.SetScenario(scenario)
	return p.use(ctx, func(ctx context.Context, raw any) error {
		return raw.(provider.Client).Chat(ctx, ProbeRequest(scenario), onEvent)
	})
}

// noUpstream: the plugin's manifest declares no network (provider.network),
// so in its ai-provider sandbox it can reach no upstream at all (the
// kernel's proxy allows exactly the declared host:ports). Such a provider
// (provider-replay) answers from what it was configured with; the items'
// claims about the upstream request do not apply to it, and any
// connection it opens anyway is a failure.
func (p *probe) noUpstream() bool {
	return p.m != nil && (p.m.Provider == nil || len(p.m.Provider.Network) == 0)
}

func checkProviderText(ctx context.Context, p *probe) outcome {
	if o, stop := p.providerBlocked(); stop {
		return o
	}
	var deltas []string
	err := p.chat(ctx, fakes.ScenarioText, func(e provider.Event) {
		if e.TextDelta != "" {
			deltas = append(deltas, e.TextDelta)
		}
	})
	if err != nil {
		return fail("Chat failed: %s", errText(err))
	}
	if got := strings.Join(deltas, ""); got != fakes.Text() {
		return fail("text deltas assemble to %q, upstream sent %q (in %d deltas)\nfix: forward every delta, in order, without dropping or merging out of order", got, fakes.Text(), len(fakes.TextDeltas))
	}
	if len(deltas) < 2 {
		return fail("the text arrived in %d event(s); stream deltas as they come instead of buffering the whole turn", len(deltas))
	}
	return pass("%d deltas assembled into %q", len(deltas), fakes.Text())
}

func checkProviderToolCall(ctx context.Context, p *probe) outcome {
	if o, stop := p.providerBlocked(); stop {
		return o
	}
	turn := provider.NewTurn()
	var orderErr error
	err := p.chat(ctx, fakes.ScenarioToolCall, func(e provider.Event) {
		if aerr := turn.Add(e); aerr != nil && orderErr == nil {
			orderErr = aerr
		}
	})
	if err != nil {
		return fail("Chat failed: %s", errText(err))
	}
	if orderErr != nil {
		return fail("the event sequence breaks the contract: %v", orderErr)
	}
	calls := turn.Result().ToolCalls
	if len(calls) != 1 {
		return fail("expected one tool call, got %d", len(calls))
	}
	c := calls[0]
	if c.CallID != fakes.ToolCallID || c.Name != fakes.ToolCallName {
		return fail("tool call id/name %q/%q, upstream sent %q/%q", c.CallID, c.Name, fakes.ToolCallID, fakes.ToolCallName)
	}
	var got, want any
	if json.Unmarshal(c.Arguments, &got) != nil || json.Unmarshal([]byte(fakes.ToolArgs()), &want) != nil || !reflect.DeepEqual(got, want) {
		return fail("the tool call's arguments assemble to %q, upstream sent %q\nfix: forward argument fragments in order, unchanged", c.Arguments, fakes.ToolArgs())
	}
	return pass("tool call %s(%s) assembled", c.Name, c.Arguments)
}

func checkProviderCancel(ctx context.Context, p *probe) outcome {
	if o, stop := p.providerBlocked(); stop {
		return o
	}
	// Drain close notices from earlier scenarios.
	for len(p.fake.StreamClosed()) > 0 {
		<-p.fake.StreamClosed()
	}
	cctx, cancel := context.WithCancel(ctx)
	var once sync.Once
	var cancelledAt time.Time
	done := make(chan error, 1)
	go func() {
		done <- p.chat(cctx, fakes.ScenarioSlow, func(e provider.Event) {
			if e.TextDelta != "" {
				once.Do(func() { cancelledAt = time.Now(); cancel() })
			}
		})
	}()
	defer cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return fail("no text arrived from a slow upstream within 10 s, or the stream did not stop when cancelled")
	}
	if cancelledAt.IsZero() {
		return fail("no delta arrived before the stream ended")
	}
	if p.noUpstream() {
		stopped := time.Since(cancelledAt)
		if n := p.fake.Conns(); n > 0 {
			return fail("the plugin declares no network (provider.network) but opened %d connection(s) to the upstream", n)
		}
		if stopped > 2*time.Second {
			return fail("the stream stopped %s after cancel (more than 2 s)", stopped.Round(time.Millisecond))
		}
		return pass("stream stopped %s after cancel; no upstream request to close: the plugin declares no network (provider.network) and opened no connection", stopped.Round(time.Millisecond))
	}
	select {
	case <-p.fake.StreamClosed():
	case <-time.After(2 * time.Second):
		return fail("the call was cancelled but the upstream request was still open 2 s later\nfix: make the upstream HTTP request with the Chat ctx (http.NewRequestWithContext) so cancelling stops it")
	}
	return pass("stream and upstream request closed %s after cancel", time.Since(cancelledAt).Round(time.Millisecond))
}

func checkProviderError(ctx context.Context, p *probe) outcome {
	if o, stop := p.providerBlocked(); stop {
		return o
	}
	var sawErr *uerr.Error
	var sawDone bool
	err := p.chat(ctx, fakes.ScenarioError, func(e provider.Event) {
		if e.Err != nil {
			sawErr = e.Err
		}
		if e.Done != nil {
			sawDone = true
		}
	})
	if err == nil && sawErr == nil {
		if sawDone {
			return fail("an upstream HTTP error ended the turn as if it succeeded; surface it as a structured error")
		}
		return fail("an upstream HTTP error produced no error at all")
	}
	ue, ok := uerr.As(err)
	if sawErr != nil {
		ue, ok = sawErr, true
	}
	if !ok {
		return fail("an upstream HTTP error broke the stream (%s) instead of arriving as a structured error event", errText(err))
	}
	if ue.Code == "INTERNAL" || ue.Code == "PLUGIN_ERROR" || ue.Code == "" || ue.Why == "" {
		return fail("the upstream error arrived as a generic %q error (%s); return a *uerr.Error with a code of your own, the upstream's reason in why, and a fix", ue.Code, ue.What)
	}
	return pass("structured error %s: %s", ue.Code, ue.What)
}

// checkProviderProxy makes one more turn and then compares the two sides
// of every connection the run made to the upstream: the TCP connections the
// fake server accepted and the tunnels the kernel's CONNECT proxy opened
// for the plugin. Each connection must be one of those tunnels. In its L2
// container a plugin that dials directly cannot connect at all (no network
// but the proxy socket); as a plain process it can, and the counts tell.
func checkProviderProxy(ctx context.Context, p *probe) outcome {
	if o, stop := p.providerBlocked(); stop {
		return o
	}
	const fix = "fix: make every upstream connection through the kernel's CONNECT proxy: when FLUFFY_PROXY_SOCKET is set, use runtime.DialViaProxy as the http.Transport's DialContext (builtin-plugins/internal/upstream does this)"
	// What the turn says is PROVIDER-STREAM-001's business; here only that
	// it reached the upstream, and how.
	err := p.chat(ctx, fakes.ScenarioText, func(provider.Event) {})
	conns := p.fake.Conns()
	tunnels, refused := p.tunnelCount()
	if p.noUpstream() {
		switch {
		case conns > 0 || tunnels > 0 || len(refused) > 0:
			return fail("the plugin declares no network (provider.network) but connected: %d connection(s) at the upstream, %d tunnel(s), refused: %s", conns, tunnels, strings.Join(refused, ", "))
		case err != nil:
			return fail("Chat failed: %s", errText(err))
		}
		return na("the plugin declares no network (provider.network): it has no upstream traffic, and the run saw no connection")
	}
	if err != nil {
		msg := fmt.Sprintf("Chat failed: %s\nthe proxy opened %d tunnel(s) to the upstream %s", errText(err), tunnels, p.fake.Target())
		if len(refused) > 0 {
			msg += "; it refused " + strings.Join(refused, ", ")
		}
		return fail("%s\n%s", msg, fix)
	}
	if conns > tunnels {
		return fail("the upstream accepted %d connection(s) during the run but the kernel's CONNECT proxy opened only %d tunnel(s) for the plugin: %d went around the proxy\n%s", conns, tunnels, conns-tunnels, fix)
	}
	if tunnels == 0 {
		return fail("no request reached the upstream through the kernel's CONNECT proxy\n%s", fix)
	}
	return pass("%d upstream connection(s), each a tunnel through the kernel's CONNECT proxy to %s (audited)", conns, p.fake.Target())
}
