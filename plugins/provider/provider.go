package provider

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
)

// PluginName is the key under which a provider plugin is dispensed.
const PluginName = "provider"

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Normalized stop reasons (Done.StopReason). Done.RawStopReason keeps the
// upstream's own word.
const (
	StopEndTurn       = "end_turn"
	StopToolUse       = "tool_use"
	StopMaxTokens     = "max_tokens"
	StopSequence      = "stop_sequence"
	StopRefusal       = "refusal"
	StopContentFilter = "content_filter"
)

// Tool choice modes (ToolChoice.Mode).
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	ToolChoiceTool     = "tool"
)

// ToolCall is a complete tool call requested by the model. Arguments is
// always a JSON object ("{}" when the model sent none).
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ReasoningBlock is one block of the model's reasoning ("thinking"), kept
// apart from the answer. Signature and Redacted are opaque: a later turn
// must send them back unchanged (Anthropic verifies them).
type ReasoningBlock struct {
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  []byte `json:"redacted,omitempty"`
}

// Message is one entry of the conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content,omitempty"`
	// Reasoning: assistant turns, the blocks the model produced, in order.
	Reasoning []ReasoningBlock `json:"reasoning,omitempty"`
	// ToolCalls: assistant turns.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and IsError: tool turns (one result per message).
	ToolCallID string `json:"tool_call_id,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
	// CacheBreakpoint asks providers with explicit prompt caching
	// (Anthropic) to cache the prompt up to and including this message.
	CacheBreakpoint bool `json:"cache_breakpoint,omitempty"`
}

// ToolSpec describes a tool the model may call, under its fluffy name
// ("fs.read"); plugins map it to a wire name (ToolNames).
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ToolChoice constrains tool use for one turn. The zero value is auto.
type ToolChoice struct {
	Mode string `json:"mode,omitempty"`
	Name string `json:"name,omitempty"`
}

// Reasoning asks for separate reasoning output. Effort is low, medium or
// high; BudgetTokens is used by providers that take a token budget.
type Reasoning struct {
	Effort       string `json:"effort,omitempty"`
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
}

// ChatRequest is one model turn.
type ChatRequest struct {
	// RequestID is the kernel's id for this turn (audit correlation; also
	// seeds the ids generated for tool calls the upstream left unnamed).
	RequestID  string     `json:"request_id,omitempty"`
	Model      string     `json:"model,omitempty"`
	System     string     `json:"system,omitempty"`
	Messages   []Message  `json:"messages"`
	Tools      []ToolSpec `json:"tools,omitempty"`
	ToolChoice ToolChoice `json:"tool_choice,omitzero"`
	MaxTokens  int        `json:"max_tokens,omitempty"`
	// Temperature nil: the provider's default.
	Temperature *float64   `json:"temperature,omitempty"`
	Reasoning   *Reasoning `json:"reasoning,omitempty"`
	// CacheSystem and CacheTools ask for the system prompt and the tool
	// definitions to be cached (Anthropic cache_control; providers with
	// automatic caching ignore the hints and report cached tokens in Usage).
	CacheSystem bool `json:"cache_system,omitempty"`
	CacheTools  bool `json:"cache_tools,omitempty"`
	// DisableParallelToolCalls asks for at most one tool call per turn.
	DisableParallelToolCalls bool `json:"disable_parallel_tool_calls,omitempty"`
}

// ModelInfo describes one model a provider serves. Zero numbers are
// unknown.
type ModelInfo struct {
	ID                string `json:"id"`
	ContextWindow     int64  `json:"context_window,omitempty"`
	MaxOutputTokens   int64  `json:"max_output_tokens,omitempty"`
	Tools             bool   `json:"tools,omitempty"`
	ParallelToolCalls bool   `json:"parallel_tool_calls,omitempty"`
	Reasoning         bool   `json:"reasoning,omitempty"`
	PromptCaching     bool   `json:"prompt_caching,omitempty"`
	Vision            bool   `json:"vision,omitempty"`
}

// Event is one streamed event of a turn; exactly one field is set. The
// order is: any number of text, reasoning and tool-call events, then at
// most one Usage, then exactly one Done or Err, and nothing after it.
// A tool call is ToolCallStart, any number of ToolCallDelta with the same
// CallID, then ToolCallEnd with the complete arguments.
type Event struct {
	TextDelta      string          `json:"text_delta,omitempty"`
	ReasoningDelta string          `json:"reasoning_delta,omitempty"`
	ReasoningEnd   *ReasoningBlock `json:"reasoning_end,omitempty"`
	ToolCallStart  *ToolCallStart  `json:"tool_call_start,omitempty"`
	ToolCallDelta  *ToolCallDelta  `json:"tool_call_delta,omitempty"`
	ToolCallEnd    *ToolCallEnd    `json:"tool_call_end,omitempty"`
	Usage          *Usage          `json:"usage,omitempty"`
	Done           *Done           `json:"done,omitempty"`
	Err            *uerr.Error     `json:"error,omitempty"`
}

// ToolCallStart announces a tool call.
type ToolCallStart struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
}

// ToolCallDelta is a fragment of a call's JSON arguments.
type ToolCallDelta struct {
	CallID         string `json:"call_id"`
	ArgumentsDelta string `json:"arguments_delta"`
}

// ToolCallEnd closes a call with its complete arguments. When Invalid is
// set (the arguments were cut off by max_tokens or are not a JSON object)
// the call must never be executed: the model gets Invalid as an error
// result instead (InvalidCallResult), Arguments is "{}" and RawArguments
// keeps what the model sent.
type ToolCallEnd struct {
	CallID       string          `json:"call_id"`
	Name         string          `json:"name"`
	Arguments    json.RawMessage `json:"arguments"`
	Invalid      *uerr.Error     `json:"invalid,omitempty"`
	RawArguments string          `json:"raw_arguments,omitempty"`
}

// Usage counts tokens of one turn. InputTokens excludes cached tokens.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoning_tokens,omitempty"`
}

// Done ends a successful turn.
type Done struct {
	StopReason        string `json:"stop_reason"`
	RawStopReason     string `json:"raw_stop_reason,omitempty"`
	UpstreamRequestID string `json:"upstream_request_id,omitempty"`
	Model             string `json:"model,omitempty"`
}

// Plugin is what a provider plugin implements. Chat sends events in order
// (Stream helps) and returns when the turn ends or ctx is cancelled; an
// error it returns is sent to the kernel as the turn's error event.
type Plugin interface {
	base.Plugin
	Models(ctx context.Context) ([]ModelInfo, error)
	Chat(ctx context.Context, req ChatRequest, send func(Event) error) error
}

// Client is the kernel's view of a provider, the same whichever API
// version was negotiated.
type Client interface {
	APIVersion() int
	Info(ctx context.Context) (base.Info, error)
	Configure(ctx context.Context, cfg base.Config, kernel base.KernelServer) error
	Health(ctx context.Context) error
	Models(ctx context.Context) ([]ModelInfo, error)
	// Chat streams a turn to onEvent; cancelling ctx stops the stream. The
	// events are checked (Checker): a plugin that breaks the event order
	// gets a PLUGIN_MALFORMED_RESPONSE error. A turn that ends with an
	// error event returns that error (a *uerr.Error; RetryOf tells whether
	// and when to retry).
	Chat(ctx context.Context, req ChatRequest, onEvent func(Event)) error
}

// PluginSets returns the go-plugin version map for a provider
// implementation serving the given API versions (nil impl: the kernel
// side).
func PluginSets(impl Plugin, versions []int) map[int]plugin.PluginSet {
	sets := map[int]plugin.PluginSet{}
	for _, v := range versions {
		switch v {
		case 1:
			sets[1] = plugin.PluginSet{PluginName: &GRPCPluginV1{Impl: impl}}
		case 2:
			sets[2] = plugin.PluginSet{PluginName: &GRPCPluginV2{Impl: impl}}
		}
	}
	return sets
}
