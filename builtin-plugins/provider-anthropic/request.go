package main

import (
	"bytes"
	"encoding/json"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// defaultMaxTokens is sent when the request sets none (the API requires it).
const defaultMaxTokens = 8192

var ephemeral = sdk.NewCacheControlEphemeralParam()

// buildRequest turns a ChatRequest into the SDK's Messages params (the
// caller adds "stream": true as the SDK's NewStreaming does): tool results
// travel as tool_result blocks of a user message (consecutive ones
// merged), assistant turns as thinking, text and tool_use blocks.
func buildRequest(req provider.ChatRequest, model string, names *provider.ToolNames) sdk.MessageNewParams {
	p := sdk.MessageNewParams{Model: sdk.Model(model), MaxTokens: int64(req.MaxTokens)}
	if p.MaxTokens <= 0 {
		p.MaxTokens = defaultMaxTokens
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.System != "" {
		b := sdk.TextBlockParam{Text: req.System}
		if req.CacheSystem {
			b.CacheControl = ephemeral
		}
		p.System = []sdk.TextBlockParam{b}
	}
	if req.Reasoning != nil && req.Reasoning.BudgetTokens > 0 {
		p.Thinking = sdk.ThinkingConfigParamUnion{OfEnabled: &sdk.ThinkingConfigEnabledParam{BudgetTokens: req.Reasoning.BudgetTokens}}
	}
	// Messages is always sent ([] when empty).
	p.Messages = make([]sdk.MessageParam, 0, len(req.Messages))
	add := func(role sdk.MessageParamRole, bs []sdk.ContentBlockParamUnion) {
		if n := len(p.Messages); n > 0 && p.Messages[n-1].Role == role {
			p.Messages[n-1].Content = append(p.Messages[n-1].Content, bs...)
			return
		}
		p.Messages = append(p.Messages, sdk.MessageParam{Role: role, Content: bs})
	}
	for _, m := range req.Messages {
		var bs []sdk.ContentBlockParamUnion
		role := sdk.MessageParamRoleUser
		switch m.Role {
		case provider.RoleAssistant:
			role = sdk.MessageParamRoleAssistant
			bs = assistant(m, names)
		case provider.RoleTool:
			bs = append(bs, sdk.ContentBlockParamUnion{OfToolResult: toolResult(m)})
		case provider.RoleSystem:
			p.System = append(p.System, sdk.TextBlockParam{Text: m.Content})
			continue
		default:
			bs = append(bs, sdk.ContentBlockParamUnion{OfText: &sdk.TextBlockParam{Text: m.Content}})
		}
		if len(bs) == 0 {
			continue
		}
		if m.CacheBreakpoint {
			// Thinking blocks take no cache_control: then there is none.
			if cc := bs[len(bs)-1].GetCacheControl(); cc != nil {
				*cc = ephemeral
			}
		}
		add(role, bs)
	}
	for i, t := range req.Tools {
		tp := &sdk.ToolParam{Name: names.Wire(t.Name), InputSchema: inputSchema(t.Parameters)}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		if req.CacheTools && i == len(req.Tools)-1 {
			tp.CacheControl = ephemeral
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: tp})
	}
	if len(p.Tools) > 0 {
		p.ToolChoice = toolChoice(req, names)
	}
	return p
}

// assistant is an assistant turn's blocks: its reasoning (signatures and
// redacted data sent back unchanged), text, then tool calls.
func assistant(m provider.Message, names *provider.ToolNames) []sdk.ContentBlockParamUnion {
	var bs []sdk.ContentBlockParamUnion
	for _, r := range m.Reasoning {
		if len(r.Redacted) > 0 {
			bs = append(bs, sdk.ContentBlockParamUnion{OfRedactedThinking: &sdk.RedactedThinkingBlockParam{Data: string(r.Redacted)}})
		} else {
			bs = append(bs, sdk.ContentBlockParamUnion{OfThinking: &sdk.ThinkingBlockParam{Thinking: r.Text, Signature: r.Signature}})
		}
	}
	if m.Content != "" {
		bs = append(bs, sdk.ContentBlockParamUnion{OfText: &sdk.TextBlockParam{Text: m.Content}})
	}
	for _, c := range m.ToolCalls {
		in := c.Arguments
		if len(in) == 0 {
			in = json.RawMessage("{}")
		}
		bs = append(bs, sdk.ContentBlockParamUnion{OfToolUse: &sdk.ToolUseBlockParam{ID: c.ID, Name: names.Wire(c.Name), Input: in}})
	}
	return bs
}

// toolResult is one tool result. Its content goes as the API's string
// form, which the SDK's block-array field cannot express, through the
// SDK's extra fields; an empty result has no content.
func toolResult(m provider.Message) *sdk.ToolResultBlockParam {
	r := &sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
	if m.IsError {
		r.IsError = param.NewOpt(true)
	}
	if m.Content != "" {
		r.SetExtraFields(map[string]any{"content": m.Content})
	}
	return r
}

// inputSchema is a tool's JSON Schema as the SDK's typed form: an object
// schema's properties and required names in their fields, every other
// keyword in ExtraFields, each value's JSON kept as declared. A schema
// that is not `"type": "object"` has no typed form and is sent as given
// (param.Override); no parameters is the empty object schema.
func inputSchema(raw json.RawMessage) sdk.ToolInputSchemaParam {
	if len(raw) == 0 {
		return sdk.ToolInputSchemaParam{Properties: map[string]any{}}
	}
	var fields map[string]json.RawMessage
	var typ string
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) || json.Unmarshal(raw, &fields) != nil ||
		json.Unmarshal(fields["type"], &typ) != nil || typ != "object" {
		return param.Override[sdk.ToolInputSchemaParam](raw)
	}
	s := sdk.ToolInputSchemaParam{}
	if v, ok := fields["properties"]; ok {
		s.Properties = v
	}
	if v, ok := fields["required"]; ok {
		var req []string
		if json.Unmarshal(v, &req) == nil && req != nil {
			s.Required = req
		} else {
			return param.Override[sdk.ToolInputSchemaParam](raw)
		}
	}
	for k, v := range fields {
		if k == "type" || k == "properties" || k == "required" {
			continue
		}
		if s.ExtraFields == nil {
			s.ExtraFields = map[string]any{}
		}
		s.ExtraFields[k] = v
	}
	return s
}

// toolChoice maps the turn's choice; disable_parallel_tool_use goes with
// every choice but none.
func toolChoice(req provider.ChatRequest, names *provider.ToolNames) sdk.ToolChoiceUnionParam {
	var noParallel param.Opt[bool]
	if req.DisableParallelToolCalls {
		noParallel = param.NewOpt(true)
	}
	switch req.ToolChoice.Mode {
	case provider.ToolChoiceNone:
		return sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	case provider.ToolChoiceRequired:
		return sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{DisableParallelToolUse: noParallel}}
	case provider.ToolChoiceTool:
		return sdk.ToolChoiceUnionParam{OfTool: &sdk.ToolChoiceToolParam{Name: names.Wire(req.ToolChoice.Name), DisableParallelToolUse: noParallel}}
	default:
		return sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{DisableParallelToolUse: noParallel}}
	}
}
