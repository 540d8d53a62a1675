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

	"github.com/hashicorp/go-hclog"
	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/upstream"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/pluginsdk/providerkit"
)

const (
	pluginName     = "provider-openai"
	defaultBaseURL = "https://api.openai.com/v1"
	defaultModel   = "gpt-4.1"
)

var up = upstream.Upstream{Name: "OpenAI", ConfigKey: "providers.openai", KeyEnv: "OPENAI_API_KEY"}

type openai struct {
	*providerkit.Base[upstream.Config]
	http *http.Client
}

func newOpenAI(log hclog.Logger, hc *http.Client) *openai {
	return &openai{Base: providerkit.New(pluginName, version, log, upstream.Parser(pluginName, defaultBaseURL, defaultModel)), http: hc}
}

// Models reports the configured model; its context window is unknown.
func (o *openai) Models(context.Context) ([]provider.ModelInfo, error) {
	c, err := o.Config()
	if err != nil {
		return nil, err
	}
	return []provider.ModelInfo{{ID: c.Model, Tools: true, ParallelToolCalls: true}}, nil
}

// Chat streams one turn through the official SDK (its request execution
// and event-stream decoder; chunks decode into the plugin's own type),
// retrying with upstream.Retry what
// failed before any output. Errors are returned (the go-plugin shim sends
// them as the turn's error event); cancelling ctx closes the request.
func (o *openai) Chat(ctx context.Context, req provider.ChatRequest, send func(provider.Event) error) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	client := o.client(cfg)
	return providerkit.Chat(ctx, req, send, providerkit.Turn{
		Model: cfg.Model,
		// Encoded once by the SDK's own encoder, reused by every attempt.
		Encode: func(model string, names *provider.ToolNames) ([]byte, error) {
			return buildRequest(req, model, cfg.BaseURL, names).MarshalJSON()
		},
		Attempt: func(ctx context.Context, body []byte, s *provider.Stream) error {
			return o.attempt(ctx, client, cfg.BaseURL, body, s)
		},
		Retry: func(ctx context.Context, attempt func() (bool, error)) error {
			return cfg.Retry.Retry(ctx, o.Log, attempt)
		},
	})
}

// client is the SDK client for cfg. It is built from options alone, never
// with oa.NewClient, which would read OPENAI_API_KEY, OPENAI_BASE_URL and
// more from the environment: the key comes from Configure only.
func (o *openai) client(cfg upstream.Config) oa.Client {
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL + "/"),
		option.WithHTTPClient(o.http),
		option.WithMaxRetries(0), // upstream.Retry is the one retry loop
		option.WithHeader("Accept", "text/event-stream"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return up.Exchange(r, next, "X-Request-Id")
		}),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithHeader("Authorization", "Bearer "+cfg.APIKey))
	}
	return oa.Client{Options: opts}
}

// attempt is one request: the SDK posts body (the encoded params, with
// "stream": true set as the SDK's NewStreaming sets it) and its Stream
// reads the event stream ([DONE], error fields) into chunk.
func (o *openai) attempt(ctx context.Context, client oa.Client, baseURL string, body []byte, s *provider.Stream) error {
	var resp *http.Response
	if err := client.Post(ctx, "chat/completions", json.RawMessage(body), &resp, option.WithJSONSet("stream", true)); err != nil {
		if _, ok := uerr.As(err); ok {
			return err // an HTTP failure, classified by up.Exchange
		}
		return up.TransportError(ctx, err, baseURL, false)
	}
	d := &decoder{s: s, slots: map[int64]*slot{}, requestID: resp.Header.Get("X-Request-Id")}
	isJSON, rest := provider.SniffJSON(resp.Body)
	if isJSON {
		defer resp.Body.Close()
		return d.whole(ctx, rest, baseURL)
	}
	// The SDK's decoder drops a last event the server did not follow
	// with a blank line; EventStreamBody adds it when the line is whole.
	resp.Body = provider.EventStreamBody(readCloser{rest, resp.Body})
	ev := &events{dec: ssestream.NewDecoder(resp), body: resp.Body}
	stream := ssestream.NewStream[chunk](ev, nil)
	defer stream.Close()
	for stream.Next() {
		if err := d.chunk(stream.Current()); err != nil {
			return err
		}
	}
	err := stream.Err()
	var se *ssestream.StreamError
	switch {
	case errors.As(err, &se):
		return d.streamError(se.Event.Data)
	case err == nil && ev.done:
		return d.done()
	case err == nil && d.finish != "":
		// finish_reason is the API's own end of the answer; [DONE] (and
		// the usage chunk before it) is the transport's, which several
		// OpenAI-compatible servers leave out.
		return d.done()
	case err == nil:
		// The SDK ends quietly when the connection closes without
		// [DONE]; the answer may be cut anywhere.
		return provider.NewError(provider.CodeStreamIncomplete, "OpenAI's stream ended before the answer was complete",
			"the connection closed before a finish_reason or the final data: [DONE]", "retry the turn", provider.RetryInfo{Retryable: !s.DeliveredToolCall()})
	case ev.dec.Err() != nil:
		return up.TransportError(ctx, ev.dec.Err(), baseURL, s.Delivered())
	}
	return malformed(fmt.Sprintf("a data line is not a JSON chunk (%s)", upstream.Clean(err.Error(), 200)))
}

// readCloser reads from r (the sniffed body) and closes c (the body).
type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// completion is a whole chat.completion, as a server that ignores
// "stream": true sends it.
type completion struct {
	chunk
	Choices []struct {
		Index        int64  `json:"index"`
		Message      delta  `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

// whole reads a non-streamed answer: its message is taken as one delta
// (calls numbered in order), then the turn ends.
func (d *decoder) whole(ctx context.Context, body io.Reader, baseURL string) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return up.TransportError(ctx, err, baseURL, false)
	}
	var c completion
	if err := json.Unmarshal(data, &c); err != nil {
		return malformed(fmt.Sprintf("the answer is JSON but not a chat completion (%s)", upstream.Clean(err.Error(), 200)))
	}
	if e := bytes.TrimSpace(c.Error); len(e) > 0 && string(e) != "null" {
		return d.streamError(data)
	}
	if len(c.Choices) == 0 {
		return malformed("the answer is JSON without choices")
	}
	ch := c.chunk
	for _, cc := range c.Choices {
		for i := range cc.Message.ToolCalls {
			cc.Message.ToolCalls[i].Index = int64(i)
		}
		ch.Choices = append(ch.Choices, choice{Index: cc.Index, Delta: cc.Message, FinishReason: cc.FinishReason})
	}
	if err := d.chunk(ch); err != nil {
		return err
	}
	return d.done()
}

// events is the SDK's event-stream decoder with what the SDK's stream
// does not say: whether data: [DONE] arrived (done). It also makes the
// SDK see every error the issue lists: an `event: error` whose data has
// no "error" field is wrapped in one, and an "error": null on an ordinary
// chunk (which the SDK would take for an error) is dropped.
type events struct {
	dec  ssestream.Decoder
	body io.ReadCloser
	done bool
	cur  ssestream.Event
}

func (e *events) Next() bool {
	if !e.dec.Next() {
		return false
	}
	e.cur = e.dec.Event()
	data := bytes.TrimSpace(e.cur.Data)
	if bytes.HasPrefix(data, []byte("[DONE]")) {
		e.done = true
	}
	switch field := gjson.GetBytes(data, "error"); {
	case e.cur.Type == "error" && !field.Exists():
		e.cur.Data = append(append([]byte(`{"error":`), data...), '}')
	case field.Type == gjson.Null:
		e.cur.Data, _ = sjson.DeleteBytes(data, "error")
	}
	return true
}

func (e *events) Event() ssestream.Event { return e.cur }
func (e *events) Err() error             { return e.dec.Err() }

// Close drains what follows [DONE] so the connection (a tunnel through
// the kernel's proxy) is reused, then closes the body.
func (e *events) Close() error {
	if e.done {
		upstream.Drain(e.body)
	}
	return e.dec.Close()
}

// ---- the stream ----

// slot is the call at one tool_calls index.
type slot struct {
	upstreamID string
	id         string // the id it travels under; "" until started
	name       string
	pending    bytes.Buffer // arguments before the name arrived
}

type decoder struct {
	s         *provider.Stream
	slots     map[int64]*slot
	order     []*slot
	finish    string
	model     string
	requestID string
}

func malformed(why string) error {
	return provider.NewError(provider.CodeStreamMalformed, "OpenAI sent an answer fluffy cannot read", why,
		"retry; if it persists with an OpenAI-compatible server, that server does not speak the Chat Completions stream format", provider.RetryInfo{})
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

// chunk is one Chat Completions stream chunk: the fields of the SDK's
// ChatCompletionChunk that fluffy reads, plus what that type has no field
// for (reasoning_content, reasoning) or cannot hold (content as a list of
// parts, arguments that are an object), kept raw.
//
// Why not the SDK's type: its decoder looks every field up by reflection
// on each chunk. It was most of the plugin's CPU in a streamed turn
// (BenchmarkOpenAITurn), and the plugin has half a CPU; encoding/json with
// this type does the same work several times faster.
type chunk struct {
	Model string `json:"model"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Choices []choice `json:"choices"`
}

type choice struct {
	Index        int64  `json:"index"`
	Delta        delta  `json:"delta"`
	FinishReason string `json:"finish_reason"`
}

type delta struct {
	Content          json.RawMessage `json:"content"`
	Refusal          string          `json:"refusal"`
	ReasoningContent json.RawMessage `json:"reasoning_content"`
	Reasoning        json.RawMessage `json:"reasoning"`
	ToolCalls        []toolCall      `json:"tool_calls"`
}

type toolCall struct {
	Index    int64  `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// chunk takes one decoded chunk; usage is the last non-null one.
func (d *decoder) chunk(c chunk) error {
	if c.Model != "" {
		d.model = c.Model
	}
	if u := c.Usage; u != nil {
		cached := u.PromptTokensDetails.CachedTokens
		d.s.SetUsage(provider.Usage{InputTokens: u.PromptTokens - cached, OutputTokens: u.CompletionTokens,
			CacheReadTokens: cached, ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens})
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // fluffy asks for one choice
		}
		if err := d.delta(ch.Delta); err != nil {
			return err
		}
		if ch.FinishReason != "" {
			d.finish = ch.FinishReason
		}
	}
	return nil
}

// delta reads one choice's delta.
func (d *decoder) delta(dl delta) error {
	for _, raw := range []json.RawMessage{dl.ReasoningContent, dl.Reasoning} {
		var r string
		if len(raw) > 0 && json.Unmarshal(raw, &r) == nil {
			if err := d.s.Reasoning(r); err != nil {
				return err
			}
		}
	}
	if err := d.content(dl.Content); err != nil {
		return err
	}
	if err := d.s.Text(dl.Refusal); err != nil {
		return err
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
	var parts []part
	if err := json.Unmarshal(raw, &parts); err != nil {
		return malformed("delta.content is neither text nor a list of parts")
	}
	for _, p := range parts {
		var err error
		switch p.Type {
		case "thinking", "reasoning":
			th, ok := thinkingText(p.Thinking)
			if !ok {
				return malformed("a thinking part of delta.content is neither text nor a list of parts")
			}
			err = d.s.Reasoning(th + p.Text)
		default:
			err = d.s.Text(p.Text)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// part is one typed part of delta.content. Thinking is text (DeepSeek-
// style servers) or, from Mistral, a list of text parts itself.
type part struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking json.RawMessage `json:"thinking"`
}

// thinkingText is the text of a thinking field: a string, null or
// missing, or a list of parts whose texts are joined.
func thinkingText(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []part
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), true
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

func (d *decoder) call(tc toolCall) error {
	idx := tc.Index // 0 when missing
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
