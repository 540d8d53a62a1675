package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance/fakes"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// ProviderConfig is the configuration the suite sends a provider plugin in
// Configure: where its upstream is. A provider that takes its endpoint from
// elsewhere cannot be certified.
type ProviderConfig struct {
	BaseURL string `json:"base_url"`
	APIKey  string `json:"api_key"`
	Proxy   string `json:"proxy,omitempty"`
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

// setupProvider starts the fake upstream and the configuration pointing at it.
func (p *probe) setupProvider() {
	p.fake = fakes.New()
	p.onClose(p.fake.Close)
	p.configJSON, _ = json.Marshal(ProviderConfig{BaseURL: p.fake.URL() + "/v1", APIKey: "conformance-key", Proxy: p.r.opts.ProxyURL})
}

func (p *probe) providerBlocked() (outcome, bool) {
	if p.m != nil && p.m.Kind != manifests.KindProvider {
		return skip("the plugin is a %s plugin", p.m.Kind), true
	}
	return p.blocked()
}

var chatReq = provider.ChatRequest{Model: "fake", MaxTokens: 64, Messages: []provider.Message{{Role: "user", Content: "say hello"}},
	Tools: []provider.ToolSpec{{Name: "fs.read", Description: "read a file", Parameters: []byte(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}}

func (p *probe) chat(ctx context.Context, scenario string, onEvent func(provider.Event)) error {
	p.fake.SetScenario(scenario)
	return p.use(ctx, func(ctx context.Context, raw any) error {
		return raw.(provider.Client).Chat(ctx, chatReq, onEvent)
	})
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

func checkProviderProxy(ctx context.Context, p *probe) outcome {
	if o, stop := p.providerBlocked(); stop {
		return o
	}
	if p.r.opts.ProxyURL == "" {
		return skip("no kernel CONNECT proxy configured (the ai-provider proxy comes with the L2 sandbox runtime); the provider reached the fake upstream directly on loopback")
	}
	return skip("proxy accounting is not implemented by this suite version")
}

var _ = fmt.Sprintf
