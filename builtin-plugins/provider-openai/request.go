package main

import (
	"bytes"
	"encoding/json"
	"net/url"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// emptySchema is the parameters of a tool that declares none.
var emptySchema = shared.FunctionParameters{"type": "object", "properties": map[string]any{}}

// buildRequest turns a ChatRequest into the SDK's Chat Completions params
// (the caller adds "stream": true as the SDK's NewStreaming does).
// OpenAI itself gets max_completion_tokens (max_tokens is refused by its
// reasoning models); compatible servers get max_tokens, which all of them
// accept.
func buildRequest(req provider.ChatRequest, model, baseURL string, names *provider.ToolNames) oa.ChatCompletionNewParams {
	p := oa.ChatCompletionNewParams{
		Model:         shared.ChatModel(model),
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.MaxTokens != 0 {
		if u, err := url.Parse(baseURL); err == nil && u.Hostname() == "api.openai.com" {
			p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	if req.Reasoning != nil && req.Reasoning.Effort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(req.Reasoning.Effort)
	}
	// Messages is always sent ([] when empty).
	p.Messages = make([]oa.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		p.Messages = append(p.Messages, system(req.System))
	}
	for _, m := range req.Messages {
		p.Messages = append(p.Messages, message(m, names))
	}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, oa.ChatCompletionToolUnionParam{OfFunction: &oa.ChatCompletionFunctionToolParam{Function: function(t, names)}})
	}
	if len(p.Tools) > 0 {
		switch req.ToolChoice.Mode {
		case provider.ToolChoiceNone, provider.ToolChoiceRequired, provider.ToolChoiceAuto:
			p.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(req.ToolChoice.Mode)}
		case provider.ToolChoiceTool:
			p.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &oa.ChatCompletionNamedToolChoiceParam{
				Function: oa.ChatCompletionNamedToolChoiceFunctionParam{Name: names.Wire(req.ToolChoice.Name)}}}
		}
		if req.DisableParallelToolCalls {
			p.ParallelToolCalls = param.NewOpt(false)
		}
	}
	return p
}

func system(content string) oa.ChatCompletionMessageParamUnion {
	return oa.ChatCompletionMessageParamUnion{OfSystem: &oa.ChatCompletionSystemMessageParam{
		Content: oa.ChatCompletionSystemMessageParamContentUnion{OfString: param.NewOpt(content)}}}
}

// message is one conversation entry; content is always a string, and null
// for an assistant turn that only calls tools. A role the kernel does not
// use is sent as a user message.
func message(m provider.Message, names *provider.ToolNames) oa.ChatCompletionMessageParamUnion {
	switch m.Role {
	case provider.RoleSystem:
		return system(m.Content)
	case provider.RoleTool:
		return oa.ChatCompletionMessageParamUnion{OfTool: &oa.ChatCompletionToolMessageParam{ToolCallID: m.ToolCallID,
			Content: oa.ChatCompletionToolMessageParamContentUnion{OfString: param.NewOpt(m.Content)}}}
	case provider.RoleAssistant:
		a := &oa.ChatCompletionAssistantMessageParam{Content: oa.ChatCompletionAssistantMessageParamContentUnion{OfString: param.NewOpt(m.Content)}}
		if len(m.ToolCalls) > 0 && m.Content == "" {
			a.Content.OfString = param.Null[string]()
		}
		for _, c := range m.ToolCalls {
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
				ID: c.ID, Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: names.Wire(c.Name), Arguments: args}}})
		}
		return oa.ChatCompletionMessageParamUnion{OfAssistant: a}
	default:
		return oa.ChatCompletionMessageParamUnion{OfUser: &oa.ChatCompletionUserMessageParam{
			Content: oa.ChatCompletionUserMessageParamContentUnion{OfString: param.NewOpt(m.Content)}}}
	}
}

// function is a tool's definition. Its parameters (a JSON Schema object)
// keep each value's JSON as the tool declared it: numbers are not
// re-encoded through float64. A schema that is not an object has no typed
// form and is sent as given.
func function(t provider.ToolSpec, names *provider.ToolNames) shared.FunctionDefinitionParam {
	f := shared.FunctionDefinitionParam{Name: names.Wire(t.Name), Parameters: emptySchema}
	if t.Description != "" {
		f.Description = param.NewOpt(t.Description)
	}
	if len(t.Parameters) > 0 {
		var fields map[string]json.RawMessage
		if bytes.HasPrefix(bytes.TrimSpace(t.Parameters), []byte("{")) && json.Unmarshal(t.Parameters, &fields) == nil {
			f.Parameters = make(shared.FunctionParameters, len(fields))
			for k, v := range fields {
				f.Parameters[k] = v
			}
		} else {
			f.Parameters = nil
			f.SetExtraFields(map[string]any{"parameters": t.Parameters})
		}
	}
	return f
}
