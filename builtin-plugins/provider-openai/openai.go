package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/uerr"
)

const (
	pluginName     = "provider-openai"
	defaultBaseURL = "https://api.openai.com/v1"
	defaultModel   = "gpt-4.1"
)

var up = upstream.Upstream{Name: "OpenAI", ConfigKey: "providers.openai", KeyEnv: "OPENAI_API_KEY"}

type openai struct {
	log  hclog.Logger
	http *http.Client

	mu  sync.Mutex
	cfg *upstream.Config
}

func newOpenAI(log hclog.Logger, hc *http.Client) *openai {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &openai{log: log, http: hc}
}

func (o *openai) Info() base.Info {
	return base.Info{Name: pluginName, Kind: base.KindProvider, Version: version, APIVersions: base.SupportedAPIVersions()}
}

func (o *openai) Configure(_ context.Context, cfg base.Config, _ base.KernelClient) error {
	c, err := upstream.ParseConfig(cfg.ConfigJSON, pluginName, defaultBaseURL)
	if err != nil {
		return err
	}
	if c.Model == "" {
		c.Model = defaultModel
	}
	o.mu.Lock()
	o.cfg = &c
	o.mu.Unlock()
	o.log.Info("configured", "config", c.String())
	return nil
}

func (o *openai) Health(context.Context) error { return nil }

func (o *openai) config() (upstream.Config, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cfg == nil {
		return upstream.Config{}, uerr.New(provider.CodeConfig, pluginName+" is not configured", "Configure was not called", "this is a bug in the kernel")
	}
	return *o.cfg, nil
}

// Models reports the configured model; its context window is unknown.
func (o *openai) Models(context.Context) ([]provider.ModelInfo, error) {
	c, err := o.config()
	if err != nil {
		return nil, err
	}
	return []provider.ModelInfo{{ID: c.Model, Tools: true, ParallelToolCalls: true}}, nil
}

// Chat streams one turn. Errors are returned (the go-plugin shim sends
// them as the turn's error event); cancelling ctx closes the request.
func (o *openai) Chat(ctx context.Context, req provider.ChatRequest, send func(provider.Event) error) error {
	cfg, err := o.config()
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
	body, err := json.Marshal(buildRequest(req, model, cfg.BaseURL, names))
	if err != nil {
		return fmt.Errorf("encode the request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return up.TransportError(ctx, err, cfg.BaseURL, false)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	resp, err := o.http.Do(hreq)
	if err != nil {
		return up.TransportError(ctx, err, cfg.BaseURL, false)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return up.HTTPError(resp, "X-Request-Id")
	}
	s := provider.NewStream(send, req.RequestID, names)
	d := &decoder{s: s, slots: map[int]*slot{}, requestID: resp.Header.Get("X-Request-Id")}
	err = d.run(ctx, resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	upstream.Drain(resp.Body)
	return nil
}

// ---- the stream ----

type chunkCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type chunkDelta struct {
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	Refusal          *string         `json:"refusal"`
	ToolCalls        []chunkCall     `json:"tool_calls"`
}

type chunkUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

type chunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Index        int        `json:"index"`
		Delta        chunkDelta `json:"delta"`
		FinishReason *string    `json:"finish_reason"`
	} `json:"choices"`
	Usage *chunkUsage        `json:"usage"`
	Error *upstream.APIError `json:"error"`
}

// slot is the call at one tool_calls index.
type slot struct {
	upstreamID string
	id         string // the id it travels under; "" until started
	name       string
	pending    bytes.Buffer // arguments before the name arrived
}

type decoder struct {
	s         *provider.Stream
	slots     map[int]*slot
	order     []*slot
	finish    string
	model     string
	requestID string
}

func malformed(why string) error {
	return provider.NewError(provider.CodeStreamMalformed, "OpenAI sent an answer fluffy cannot read", why,
		"retry; if it persists with an OpenAI-compatible server, that server does not speak the Chat Completions stream format", provider.RetryInfo{})
}

func (d *decoder) run(ctx context.Context, body io.Reader) error {
	r := upstream.NewSSEReader(body)
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return provider.NewError(provider.CodeStreamIncomplete, "OpenAI's stream ended before the answer was complete",
					"the connection closed without the final data: [DONE]", "retry the turn", provider.RetryInfo{Retryable: !d.s.DeliveredToolCall()})
			}
			return up.TransportError(ctx, err, "", d.s.Delivered())
		}
		data := bytes.TrimSpace(ev.Data)
		if ev.Event == "error" {
			return d.streamError(data)
		}
		if len(data) == 0 {
			continue
		}
		if string(data) == "[DONE]" {
			return d.done()
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return malformed(fmt.Sprintf("a data line is not a JSON chunk (%v): %s", err, upstream.Clean(string(data), 200)))
		}
		if c.Error != nil {
			return d.streamError(data)
		}
		if err := d.chunk(c); err != nil {
			return err
		}
	}
}

func (d *decoder) streamError(data []byte) error {
	ae, ok := upstream.DecodeAPIError(data)
	if !ok {
		_ = json.Unmarshal(data, &ae)
		if ae.Message == "" {
			ae.Message = string(data)
		}
	}
	return up.Classify(0, ae.Type, ae.CodeString(), ae.Message, provider.RetryInfo{UpstreamRequestID: upstream.Clean(d.requestID, 200)})
}

func (d *decoder) chunk(c chunk) error {
	if c.Model != "" {
		d.model = c.Model
	}
	if c.Usage != nil {
		u := provider.Usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
		if c.Usage.PromptTokensDetails != nil {
			u.CacheReadTokens = c.Usage.PromptTokensDetails.CachedTokens
			u.InputTokens -= u.CacheReadTokens
		}
		if c.Usage.CompletionTokensDetails != nil {
			u.ReasoningTokens = c.Usage.CompletionTokensDetails.ReasoningTokens
		}
		d.s.SetUsage(u)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // fluffy asks for one choice
		}
		if err := d.delta(ch.Delta); err != nil {
			return err
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			d.finish = *ch.FinishReason
		}
	}
	return nil
}

func (d *decoder) delta(dl chunkDelta) error {
	for _, r := range []*string{dl.ReasoningContent, dl.Reasoning} {
		if r != nil {
			if err := d.s.Reasoning(*r); err != nil {
				return err
			}
		}
	}
	if err := d.content(dl.Content); err != nil {
		return err
	}
	if dl.Refusal != nil && *dl.Refusal != "" {
		if err := d.s.Text(*dl.Refusal); err != nil {
			return err
		}
	}
	for _, tc := range dl.ToolCalls {
		if err := d.call(tc); err != nil {
			return err
		}
	}
	return nil
}

// content is a string, null, or an array of parts (text, and thinking
// parts some servers send).
func (d *decoder) content(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return d.s.Text(s)
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return malformed("delta.content is neither text nor a list of parts")
	}
	for _, p := range parts {
		var err error
		switch p.Type {
		case "thinking", "reasoning":
			err = d.s.Reasoning(p.Thinking + p.Text)
		default:
			err = d.s.Text(p.Text)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// arguments reads a fragment: a JSON string, null or missing (nothing),
// or, from some servers, the arguments object itself.
func arguments(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(t, &s) == nil {
		return s
	}
	return string(t)
}

func (d *decoder) call(tc chunkCall) error {
	idx := 0
	if tc.Index != nil {
		idx = *tc.Index
	}
	sl := d.slots[idx]
	// A new id at an occupied index is a new call.
	if sl == nil || (tc.ID != "" && sl.upstreamID != "" && tc.ID != sl.upstreamID) {
		sl = &slot{upstreamID: tc.ID}
		d.slots[idx] = sl
		d.order = append(d.order, sl)
	}
	if sl.upstreamID == "" {
		sl.upstreamID = tc.ID
	}
	frag := arguments(tc.Function.Arguments)
	if sl.id == "" {
		if tc.Function.Name == "" {
			sl.pending.WriteString(frag)
			return nil
		}
		id, err := d.s.StartCall(sl.upstreamID, tc.Function.Name)
		if err != nil {
			return err
		}
		sl.id, sl.name = id, tc.Function.Name
		frag = sl.pending.String() + frag
		sl.pending.Reset()
	}
	return d.s.CallArgs(sl.id, frag)
}

func (d *decoder) done() error {
	// Calls whose name never arrived cannot be run; they still travel (the
	// router refuses the unknown tool) so the model learns about it.
	for _, sl := range d.order {
		if sl.id == "" {
			id, err := d.s.StartCall(sl.upstreamID, "unnamed_tool")
			if err != nil {
				return err
			}
			sl.id = id
			if err := d.s.CallArgs(id, sl.pending.String()); err != nil {
				return err
			}
		}
	}
	stop := provider.StopEndTurn
	switch d.finish {
	case "tool_calls", "function_call":
		stop = provider.StopToolUse
	case "length":
		stop = provider.StopMaxTokens
	case "content_filter":
		stop = provider.StopContentFilter
	}
	if stop == provider.StopEndTurn && d.s.DeliveredToolCall() {
		stop = provider.StopToolUse
	}
	return d.s.Finish(provider.Done{StopReason: stop, RawStopReason: d.finish, UpstreamRequestID: upstream.Clean(d.requestID, 200), Model: d.model})
}
