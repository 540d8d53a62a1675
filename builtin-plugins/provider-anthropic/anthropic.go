package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/uerr"
)

const (
	pluginName       = "provider-anthropic"
	defaultBaseURL   = "https://api.anthropic.com"
	defaultModel     = "claude-sonnet-4-5"
	anthropicVersion = "2023-06-01"
)

var up = upstream.Upstream{Name: "Anthropic", ConfigKey: "providers.anthropic", KeyEnv: "ANTHROPIC_API_KEY"}

type anthropic struct {
	log  hclog.Logger
	http *http.Client

	mu  sync.Mutex
	cfg *upstream.Config
}

func newAnthropic(log hclog.Logger, hc *http.Client) *anthropic {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &anthropic{log: log, http: hc}
}

func (a *anthropic) Info() base.Info {
	return base.Info{Name: pluginName, Kind: base.KindProvider, Version: version, APIVersions: base.SupportedAPIVersions()}
}

func (a *anthropic) Configure(_ context.Context, cfg base.Config, _ base.KernelClient) error {
	c, err := upstream.ParseConfig(cfg.ConfigJSON, pluginName, defaultBaseURL)
	if err != nil {
		return err
	}
	if c.Model == "" {
		c.Model = defaultModel
	}
	a.mu.Lock()
	a.cfg = &c
	a.mu.Unlock()
	a.log.Info("configured", "config", c.String())
	return nil
}

func (a *anthropic) Health(context.Context) error { return nil }

func (a *anthropic) config() (upstream.Config, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg == nil {
		return upstream.Config{}, uerr.New(provider.CodeConfig, pluginName+" is not configured", "Configure was not called", "this is a bug in the kernel")
	}
	return *a.cfg, nil
}

// Models reports the configured model.
func (a *anthropic) Models(context.Context) ([]provider.ModelInfo, error) {
	c, err := a.config()
	if err != nil {
		return nil, err
	}
	return []provider.ModelInfo{{ID: c.Model, ContextWindow: 200000, Tools: true, ParallelToolCalls: true, Reasoning: true, PromptCaching: true}}, nil
}

// Chat streams one turn; errors are returned (sent as the turn's error
// event by the shim); cancelling ctx closes the request.
func (a *anthropic) Chat(ctx context.Context, req provider.ChatRequest, send func(provider.Event) error) error {
	cfg, err := a.config()
	if err != nil {
		return err
	}
	names, err := provider.ToolNamesOf(req.Tools)
	if err != nil {
		return err
	}
	model := req.Model
	if model == "" {
		model = cfg.Model
	}
	body, err := json.Marshal(buildRequest(req, model, names))
	if err != nil {
		return fmt.Errorf("encode the request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, messagesURL(cfg.BaseURL), bytes.NewReader(body))
	if err != nil {
		return up.TransportError(ctx, err, cfg.BaseURL, false)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	hreq.Header.Set("Anthropic-Version", anthropicVersion)
	if cfg.APIKey != "" {
		hreq.Header.Set("X-Api-Key", cfg.APIKey)
	}
	resp, err := a.http.Do(hreq)
	if err != nil {
		return up.TransportError(ctx, err, cfg.BaseURL, false)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return up.HTTPError(resp, "Request-Id")
	}
	d := &decoder{s: provider.NewStream(send, req.RequestID, names), blocks: map[int]*openBlock{}, requestID: resp.Header.Get("Request-Id")}
	if err := d.run(ctx, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	upstream.Drain(resp.Body)
	return nil
}

// messagesURL is the endpoint under base, which is the API root
// (https://api.anthropic.com) or, as some users and tools write it,
// already ends in /v1.
func messagesURL(base string) string {
	if strings.HasSuffix(base, "/v1") {
		return base + "/messages"
	}
	return base + "/v1/messages"
}

// ---- the stream ----

type wireUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string     `json:"id"`
		Model string     `json:"model"`
		Usage *wireUsage `json:"usage"`
	} `json:"message"`
	Index        *int `json:"index"`
	ContentBlock *struct {
		Type     string          `json:"type"`
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Text     string          `json:"text"`
		Thinking string          `json:"thinking"`
		Input    json.RawMessage `json:"input"`
		Data     string          `json:"data"`
	} `json:"content_block"`
	Delta *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		Thinking    string  `json:"thinking"`
		Signature   string  `json:"signature"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage         `json:"usage"`
	Error *upstream.APIError `json:"error"`
}

type openBlock struct {
	kind      string // text, thinking, tool_use, other
	callID    string
	args      strings.Builder // the input_json_delta fragments
	input     json.RawMessage // the input of content_block_start
	signature string
}

type decoder struct {
	s         *provider.Stream
	blocks    map[int]*openBlock
	usage     provider.Usage
	stop      string
	model     string
	started   bool
	requestID string
}

func malformed(why string) error {
	return provider.NewError(provider.CodeStreamMalformed, "Anthropic sent an answer fluffy cannot read", why, "retry the turn", provider.RetryInfo{})
}

func (d *decoder) run(ctx context.Context, body io.Reader) error {
	r := upstream.NewSSEReader(body)
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return provider.NewError(provider.CodeStreamIncomplete, "Anthropic's stream ended before the answer was complete",
					"the connection closed without message_stop", "retry the turn", provider.RetryInfo{Retryable: !d.s.DeliveredToolCall()})
			}
			return up.TransportError(ctx, err, "", d.s.Delivered())
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		var e streamEvent
		if err := json.Unmarshal(data, &e); err != nil {
			return malformed(fmt.Sprintf("a %s event is not JSON (%v): %s", upstream.Clean(ev.Event, 40), err, upstream.Clean(string(data), 200)))
		}
		if e.Type == "" {
			e.Type = ev.Event
		}
		end, err := d.event(e)
		if err != nil || end {
			return err
		}
	}
}

func (d *decoder) setUsage(u *wireUsage) {
	if u == nil {
		return
	}
	if u.InputTokens != nil {
		d.usage.InputTokens = *u.InputTokens
	}
	if u.OutputTokens != nil {
		d.usage.OutputTokens = *u.OutputTokens // cumulative
	}
	if u.CacheCreationInputTokens != nil {
		d.usage.CacheWriteTokens = *u.CacheCreationInputTokens
	}
	if u.CacheReadInputTokens != nil {
		d.usage.CacheReadTokens = *u.CacheReadInputTokens
	}
	d.s.SetUsage(d.usage)
}

func (d *decoder) event(e streamEvent) (bool, error) {
	switch e.Type {
	case "ping":
	case "error":
		var ae upstream.APIError
		if e.Error != nil {
			ae = *e.Error
		}
		return true, up.Classify(0, ae.Type, ae.CodeString(), ae.Message, provider.RetryInfo{UpstreamRequestID: upstream.Clean(d.requestID, 200)})
	case "message_start":
		if e.Message == nil {
			return true, malformed("message_start without a message")
		}
		d.started, d.model = true, e.Message.Model
		d.setUsage(e.Message.Usage)
	case "content_block_start":
		if !d.started || e.Index == nil || e.ContentBlock == nil {
			return true, malformed("content_block_start before message_start or without index and block")
		}
		return false, d.blockStart(*e.Index, e)
	case "content_block_delta":
		if e.Index == nil || e.Delta == nil || d.blocks[*e.Index] == nil {
			return true, malformed("content_block_delta for a block that is not open")
		}
		return false, d.blockDelta(d.blocks[*e.Index], e)
	case "content_block_stop":
		if e.Index == nil || d.blocks[*e.Index] == nil {
			return true, malformed("content_block_stop for a block that is not open")
		}
		b := d.blocks[*e.Index]
		delete(d.blocks, *e.Index)
		return false, d.blockStop(b)
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != nil {
			d.stop = *e.Delta.StopReason
		}
		d.setUsage(e.Usage)
	case "message_stop":
		if !d.started {
			return true, malformed("message_stop before message_start")
		}
		return true, d.finish()
	}
	// Unknown event types are ignored, as the API's versioning asks.
	return false, nil
}

func (d *decoder) blockStart(idx int, e streamEvent) error {
	cb := e.ContentBlock
	b := &openBlock{kind: cb.Type}
	d.blocks[idx] = b
	switch cb.Type {
	case "text":
		return d.s.Text(cb.Text)
	case "thinking":
		return d.s.Reasoning(cb.Thinking)
	case "redacted_thinking":
		b.kind = "other"
		return d.s.EndReasoning("", []byte(cb.Data))
	case "tool_use":
		id, err := d.s.StartCall(cb.ID, cb.Name)
		b.callID, b.input = id, cb.Input
		return err
	}
	b.kind = "other"
	return nil
}

func (d *decoder) blockDelta(b *openBlock, e streamEvent) error {
	dl := e.Delta
	switch dl.Type {
	case "text_delta":
		return d.s.Text(dl.Text)
	case "thinking_delta":
		return d.s.Reasoning(dl.Thinking)
	case "signature_delta":
		b.signature += dl.Signature
	case "input_json_delta":
		if b.kind != "tool_use" {
			return malformed("input_json_delta in a block that is not tool_use")
		}
		b.args.WriteString(dl.PartialJSON)
		return d.s.CallArgs(b.callID, dl.PartialJSON)
	}
	return nil
}

func (d *decoder) blockStop(b *openBlock) error {
	switch b.kind {
	case "thinking":
		return d.s.EndReasoning(b.signature, nil)
	case "tool_use":
		// Some servers put the whole input in content_block_start.
		if in := bytes.TrimSpace(b.input); b.args.Len() == 0 && len(in) > 0 && string(in) != "{}" && string(in) != "null" {
			b.args.Write(in)
			if err := d.s.CallArgs(b.callID, string(in)); err != nil {
				return err
			}
		}
		// The stop reason comes after the block: input that is not a
		// complete JSON object stays open, and Finish marks it invalid
		// (cut off when the stop reason is max_tokens).
		if a := strings.TrimSpace(b.args.String()); a != "" && !json.Valid([]byte(a)) {
			return nil
		}
		return d.s.EndCall(b.callID)
	}
	return nil
}

func (d *decoder) finish() error {
	stop := provider.StopEndTurn
	switch d.stop {
	case "tool_use":
		stop = provider.StopToolUse
	case "max_tokens":
		stop = provider.StopMaxTokens
	case "stop_sequence":
		stop = provider.StopSequence
	case "refusal":
		stop = provider.StopRefusal
	}
	if stop == provider.StopEndTurn && d.s.DeliveredToolCall() {
		stop = provider.StopToolUse
	}
	return d.s.Finish(provider.Done{StopReason: stop, RawStopReason: d.stop, UpstreamRequestID: upstream.Clean(d.requestID, 200), Model: d.model})
}
