package main

import (
	"encoding/json"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// defaultMaxTokens is sent when the request sets none (the API requires it).
const defaultMaxTokens = 8192

type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

type block struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      string          `json:"content,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	Thinking     string          `json:"thinking,omitempty"`
	Signature    string          `json:"signature,omitempty"`
	Data         string          `json:"data,omitempty"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type wireMessage struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type wireTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type wireRequest struct {
	Model       string         `json:"model"`
	MaxTokens   int            `json:"max_tokens"`
	System      []block        `json:"system,omitempty"`
	Messages    []wireMessage  `json:"messages"`
	Tools       []wireTool     `json:"tools,omitempty"`
	ToolChoice  map[string]any `json:"tool_choice,omitempty"`
	Stream      bool           `json:"stream"`
	Temperature *float64       `json:"temperature,omitempty"`
	Thinking    map[string]any `json:"thinking,omitempty"`
}

// buildRequest turns a ChatRequest into a Messages API body: tool results
// travel as tool_result blocks of a user message (consecutive ones
// merged), assistant turns as thinking, text and tool_use blocks.
func buildRequest(req provider.ChatRequest, model string, names *provider.ToolNames) wireRequest {
	w := wireRequest{Model: model, MaxTokens: req.MaxTokens, Stream: true, Temperature: req.Temperature}
	if w.MaxTokens <= 0 {
		w.MaxTokens = defaultMaxTokens
	}
	if req.System != "" {
		b := block{Type: "text", Text: req.System}
		if req.CacheSystem {
			b.CacheControl = ephemeral
		}
		w.System = []block{b}
	}
	if req.Reasoning != nil && req.Reasoning.BudgetTokens > 0 {
		w.Thinking = map[string]any{"type": "enabled", "budget_tokens": req.Reasoning.BudgetTokens}
	}
	add := func(role string, bs ...block) {
		if n := len(w.Messages); n > 0 && w.Messages[n-1].Role == role {
			w.Messages[n-1].Content = append(w.Messages[n-1].Content, bs...)
			return
		}
		w.Messages = append(w.Messages, wireMessage{Role: role, Content: bs})
	}
	for _, m := range req.Messages {
		var bs []block
		role := "user"
		switch m.Role {
		case provider.RoleAssistant:
			role = "assistant"
			for _, r := range m.Reasoning {
				if len(r.Redacted) > 0 {
					bs = append(bs, block{Type: "redacted_thinking", Data: string(r.Redacted)})
				} else {
					bs = append(bs, block{Type: "thinking", Thinking: r.Text, Signature: r.Signature})
				}
			}
			if m.Content != "" {
				bs = append(bs, block{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				in := c.Arguments
				if len(in) == 0 {
					in = json.RawMessage("{}")
				}
				bs = append(bs, block{Type: "tool_use", ID: c.ID, Name: names.Wire(c.Name), Input: in})
			}
		case provider.RoleTool:
			bs = append(bs, block{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError})
		case provider.RoleSystem:
			w.System = append(w.System, block{Type: "text", Text: m.Content})
			continue
		default:
			bs = append(bs, block{Type: "text", Text: m.Content})
		}
		if len(bs) == 0 {
			continue
		}
		if m.CacheBreakpoint {
			bs[len(bs)-1].CacheControl = ephemeral
		}
		add(role, bs...)
	}
	for i, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		wt := wireTool{Name: names.Wire(t.Name), Description: t.Description, InputSchema: schema}
		if req.CacheTools && i == len(req.Tools)-1 {
			wt.CacheControl = ephemeral
		}
		w.Tools = append(w.Tools, wt)
	}
	if len(w.Tools) > 0 {
		tc := map[string]any{}
		switch req.ToolChoice.Mode {
		case provider.ToolChoiceNone:
			tc["type"] = "none"
		case provider.ToolChoiceRequired:
			tc["type"] = "any"
		case provider.ToolChoiceTool:
			tc["type"], tc["name"] = "tool", names.Wire(req.ToolChoice.Name)
		default:
			tc["type"] = "auto"
		}
		if req.DisableParallelToolCalls && tc["type"] != "none" {
			tc["disable_parallel_tool_use"] = true
		}
		w.ToolChoice = tc
	}
	return w
}
