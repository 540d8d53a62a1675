package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/pluginsdk/providerkit"
)

const (
	pluginName       = "provider-anthropic"
	defaultBaseURL   = "https://api.anthropic.com"
	defaultModel     = "claude-sonnet-4-5"
	anthropicVersion = "2023-06-01"
)

var up = upstream.Upstream{Name: "Anthropic", ConfigKey: "providers.anthropic", KeyEnv: "ANTHROPIC_API_KEY"}

type anthropic struct {
	*providerkit.Base[upstream.Config]
	http *http.Client
}

func newAnthropic(log hclog.Logger, hc *http.Client) *anthropic {
	return &anthropic{Base: providerkit.New(pluginName, version, log, upstream.Parser(pluginName, defaultBaseURL, defaultModel)), http: hc}
}

// Models reports the configured model.
func (a *anthropic) Models(context.Context) ([]provider.ModelInfo, error) {
	c, err := a.Config()
	if err != nil {
		return nil, err
	}
	return []provider.ModelInfo{{ID: c.Model, ContextWindow: 200000, Tools: true, ParallelToolCalls: true, Reasoning: true, PromptCaching: true}}, nil
}

// Chat streams one turn through the official SDK (its request execution
// and event-stream decoder; events decode into streamEvent), retrying with upstream.Retry what
// failed before any output. Errors are returned (sent as the turn's error
// event by the shim); cancelling ctx closes the request.
func (a *anthropic) Chat(ctx context.Context, req provider.ChatRequest, send func(provider.Event) error) error {
	cfg, err := a.Config()
	if err != nil {
		return err
	}
	client := a.client(cfg)
	return providerkit.Chat(ctx, req, send, providerkit.Turn{
		Model: cfg.Model,
		// Encoded once by the SDK's own encoder, reused by every attempt.
		Encode: func(model string, names *provider.ToolNames) ([]byte, error) {
			return buildRequest(req, model, names).MarshalJSON()
		},
		Attempt: func(ctx context.Context, body []byte, s *provider.Stream) error {
			return a.attempt(ctx, client, cfg.BaseURL, body, s)
		},
		Retry: func(ctx context.Context, attempt func() (bool, error)) error {
			return cfg.Retry.Retry(ctx, a.Log, attempt)
		},
	})
}

// client is the SDK client for cfg, without the SDK's environment
// defaults (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, ANTHROPIC_BASE_URL…):
// the key comes from Configure only.
func (a *anthropic) client(cfg upstream.Config) sdk.Client {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(cfg.BaseURL + "/"),
		option.WithHTTPClient(a.http),
		option.WithMaxRetries(0), // upstream.Retry is the one retry loop
		option.WithHeader("Accept", "text/event-stream"),
		option.WithHeader("Anthropic-Version", anthropicVersion),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return up.Exchange(r, next, "Request-Id")
		}),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return sdk.NewClient(opts...)
}

// messagesPath is the endpoint under base, which is the API root
// (https://api.anthropic.com) or, as some users and tools write it,
// already ends in /v1.
func messagesPath(base string) string {
	if strings.HasSuffix(base, "/v1") {
		return "messages"
	}
	return "v1/messages"
}

// attempt is one request: the SDK posts body (the encoded params, with
// "stream": true set as the SDK's NewStreaming sets it) and its Stream
// reads the event stream into streamEvent.
func (a *anthropic) attempt(ctx context.Context, client sdk.Client, baseURL string, body []byte, s *provider.Stream) error {
	var resp *http.Response
	if err := client.Post(ctx, messagesPath(baseURL), json.RawMessage(body), &resp, option.WithJSONSet("stream", true)); err != nil {
		if _, ok := uerr.As(err); ok {
			return err // an HTTP failure, classified by up.Exchange
		}
		return up.TransportError(ctx, err, baseURL, false)
	}
	d := &decoder{s: s, blocks: map[int64]*openBlock{}, requestID: resp.Header.Get("Request-Id")}
	isJSON, rest := provider.SniffJSON(resp.Body)
	if isJSON {
		defer resp.Body.Close()
		return d.whole(ctx, rest, baseURL)
	}
	// The SDK's decoder drops a last event the server did not follow
	// with a blank line; EventStreamBody adds it when the line is whole.
	resp.Body = provider.EventStreamBody(readCloser{rest, resp.Body})
	ev := &events{dec: ssestream.NewDecoder(resp), body: resp.Body}
	stream := ssestream.NewStream[streamEvent](ev, nil)
	defer stream.Close()
	for stream.Next() {
		end, err := d.event(stream.Current())
		if err != nil {
			return err
		}
		if end {
			ev.done = true
			return nil
		}
	}
	err := stream.Err()
	switch {
	case ev.errData != nil:
		return d.streamError(ev.errData)
	case err == nil:
		return provider.NewError(provider.CodeStreamIncomplete, "Anthropic's stream ended before the answer was complete",
			"the connection closed without message_stop", "retry the turn", provider.RetryInfo{Retryable: !s.DeliveredToolCall()})
	case ev.dec.Err() != nil:
		return up.TransportError(ctx, ev.dec.Err(), baseURL, s.Delivered())
	}
	return malformed(fmt.Sprintf("an event is not JSON (%s)", upstream.Clean(err.Error(), 200)))
}

// readCloser reads from r (the sniffed body) and closes c (the body).
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// message is a whole Messages answer, as a server that ignores
// "stream": true sends it (or an error object).
type message struct {
	Type       string         `json:"type"`
	Model      string         `json:"model"`
	Content    []contentBlock `json:"content"`
	StopReason string         `json:"stop_reason"`
	Usage      *usage         `json:"usage"`
}

// whole reads a non-streamed answer: each content block is started and
// stopped as if streamed, then the turn ends with its stop_reason.
func (d *decoder) whole(ctx context.Context, body io.Reader, baseURL string) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return up.TransportError(ctx, err, baseURL, false)
	}
	var m message
	if err := json.Unmarshal(data, &m); err != nil {
		return malformed(fmt.Sprintf("the answer is JSON but not a message (%s)", upstream.Clean(err.Error(), 200)))
	}
	switch m.Type {
	case "error":
		return d.streamError(data)
	case "message":
	default:
		return malformed("the answer is JSON but not a message")
	}
	d.started, d.model, d.stop = true, m.Model, m.StopReason
	if m.Usage != nil {
		d.setUsage(m.Usage)
	}
	for i, cb := range m.Content {
		if err := d.blockStart(int64(i), cb); err != nil {
			return err
		}
		b := d.blocks[int64(i)]
		delete(d.blocks, int64(i))
		b.signature = cb.Signature
		if err := d.blockStop(b); err != nil {
			return err
		}
	}
	return d.finish()
}

// events is the SDK's event-stream decoder, keeping the data of an error
// event (the SDK's stream reports it only as text).
type events struct {
	dec     ssestream.Decoder
	body    io.ReadCloser
	errData []byte
	done    bool
}

func (e *events) Next() bool {
	if !e.dec.Next() {
		return false
	}
	if ev := e.dec.Event(); ev.Type == "error" {
		e.errData = bytes.TrimSpace(ev.Data)
	}
	return true
}

func (e *events) Event() ssestream.Event { return e.dec.Event() }
func (e *events) Err() error             { return e.dec.Err() }

// Close drains what follows message_stop so the connection (a tunnel
// through the kernel's proxy) is reused, then closes the body.
func (e *events) Close() error {
	if e.done {
		upstream.Drain(e.body)
	}
	return e.dec.Close()
}

// ---- the stream ----

type openBlock struct {
	kind      string // text, thinking, tool_use, other
	callID    string
	args      strings.Builder // the input_json_delta fragments
	input     json.RawMessage // the input of content_block_start
	signature string
}

type decoder struct {
	s         *provider.Stream
	blocks    map[int64]*openBlock
	usage     provider.Usage
	stop      string
	model     string
	started   bool
	requestID string
}

func malformed(why string) error {
	return provider.NewError(provider.CodeStreamMalformed, "Anthropic sent an answer fluffy cannot read", why, "retry the turn", provider.RetryInfo{})
}

func (d *decoder) streamError(data []byte) error {
	ae, _ := upstream.DecodeAPIError(data)
	if ae.Message == "" && ae.Type == "" {
		ae.Message = string(data)
	}
	return up.Classify(0, ae.Type, ae.CodeString(), ae.Message, provider.RetryInfo{UpstreamRequestID: upstream.Clean(d.requestID, 200)})
}

// streamEvent is one Messages stream event: the fields of the SDK's
// MessageStreamEventUnion that fluffy reads, pointers where presence
// matters.
//
// Why not the SDK's type: its decoder looks every field up by reflection
// on each event, the largest share of the plugin's CPU in a streamed turn
// (BenchmarkAnthropicTurn), and the plugin has half a CPU; encoding/json
// with this type does the same work several times faster.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Model string `json:"model"`
		Usage *usage `json:"usage"`
	} `json:"message"`
	Index        *int64        `json:"index"`
	ContentBlock *contentBlock `json:"content_block"`
	Delta        *eventDelta   `json:"delta"`
	Usage        *usage        `json:"usage"`
}

// usage is a token count set; nil fields were absent (or null).
type usage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"` // in a whole message
	Data      string          `json:"data"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

// eventDelta is a content_block_delta's delta or a message_delta's.
type eventDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Thinking    string `json:"thinking"`
	Signature   string `json:"signature"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
}

// setUsage applies the counts present (output_tokens is cumulative).
func (d *decoder) setUsage(u *usage) {
	for _, f := range []struct {
		v   *int64
		dst *int64
	}{{u.InputTokens, &d.usage.InputTokens}, {u.OutputTokens, &d.usage.OutputTokens}, {u.CacheCreationInputTokens, &d.usage.CacheWriteTokens}, {u.CacheReadInputTokens, &d.usage.CacheReadTokens}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	d.s.SetUsage(d.usage)
}

func (d *decoder) event(e streamEvent) (bool, error) {
	switch e.Type {
	case "message_start":
		if e.Message == nil {
			return true, malformed("message_start without a message")
		}
		d.started, d.model = true, e.Message.Model
		if e.Message.Usage != nil {
			d.setUsage(e.Message.Usage)
		}
	case "content_block_start":
		if !d.started || e.Index == nil || e.ContentBlock == nil {
			return true, malformed("content_block_start before message_start or without index and block")
		}
		return false, d.blockStart(*e.Index, *e.ContentBlock)
	case "content_block_delta":
		b := d.open(e.Index)
		if b == nil || e.Delta == nil {
			return true, malformed("content_block_delta for a block that is not open")
		}
		return false, d.blockDelta(b, *e.Delta)
	case "content_block_stop":
		b := d.open(e.Index)
		if b == nil {
			return true, malformed("content_block_stop for a block that is not open")
		}
		delete(d.blocks, *e.Index)
		return false, d.blockStop(b)
	case "message_delta":
		if e.Delta != nil && e.Delta.StopReason != "" {
			d.stop = e.Delta.StopReason
		}
		if e.Usage != nil {
			d.setUsage(e.Usage)
		}
	case "message_stop":
		if !d.started {
			return true, malformed("message_stop before message_start")
		}
		return true, d.finish()
	}
	// ping and error events never reach here (the SDK's stream skips the
	// one and ends at the other); unknown types are ignored, as the API's
	// versioning asks.
	return false, nil
}

// open is the open block at index, nil if there is none (or no index).
func (d *decoder) open(index *int64) *openBlock {
	if index == nil {
		return nil
	}
	return d.blocks[*index]
}

func (d *decoder) blockStart(idx int64, cb contentBlock) error {
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

func (d *decoder) blockDelta(b *openBlock, dl eventDelta) error {
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
