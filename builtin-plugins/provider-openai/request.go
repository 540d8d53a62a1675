package main

import (
	"encoding/json"
	"net/url"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type wireTool struct {
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function wireCallFunction `json:"function"`
}

type wireMessage struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []wireCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type wireRequest struct {
	Model               string          `json:"model"`
	Messages            []wireMessage   `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       map[string]bool `json:"stream_options"`
	Tools               []wireTool      `json:"tools,omitempty"`
	ToolChoice          any             `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
}

func str(s string) *string { return &s }

// buildRequest turns a ChatRequest into the Chat Completions body.
// OpenAI itself gets max_completion_tokens (max_tokens is refused by its
// reasoning models); compatible servers get max_tokens, which all of them
// accept.
func buildRequest(req provider.ChatRequest, model, baseURL string, names *provider.ToolNames) wireRequest {
	w := wireRequest{Model: model, Stream: true, StreamOptions: map[string]bool{"include_usage": true}, Temperature: req.Temperature}
	if u, err := url.Parse(baseURL); err == nil && u.Hostname() == "api.openai.com" {
		w.MaxCompletionTokens = req.MaxTokens
	} else {
		w.MaxTokens = req.MaxTokens
	}
	if req.Reasoning != nil && req.Reasoning.Effort != "" {
		w.ReasoningEffort = req.Reasoning.Effort
	}
	if req.System != "" {
		w.Messages = append(w.Messages, wireMessage{Role: "system", Content: str(req.System)})
	}
	for _, m := range req.Messages {
		wm := wireMessage{Role: m.Role, Content: str(m.Content), ToolCallID: m.ToolCallID}
		if m.Role == provider.RoleAssistant && len(m.ToolCalls) > 0 {
			if m.Content == "" {
				wm.Content = nil
			}
			for _, c := range m.ToolCalls {
				args := string(c.Arguments)
				if args == "" {
					args = "{}"
				}
				wm.ToolCalls = append(wm.ToolCalls, wireCall{ID: c.ID, Type: "function", Function: wireCallFunction{Name: names.Wire(c.Name), Arguments: args}})
			}
		}
		w.Messages = append(w.Messages, wm)
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		w.Tools = append(w.Tools, wireTool{Type: "function", Function: wireFunction{Name: names.Wire(t.Name), Description: t.Description, Parameters: params}})
	}
	if len(w.Tools) > 0 {
		switch req.ToolChoice.Mode {
		case provider.ToolChoiceNone, provider.ToolChoiceRequired, provider.ToolChoiceAuto:
			w.ToolChoice = req.ToolChoice.Mode
		case provider.ToolChoiceTool:
			w.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": names.Wire(req.ToolChoice.Name)}}
		}
		if req.DisableParallelToolCalls {
			f := false
			w.ParallelToolCalls = &f
		}
	}
	return w
}
