package providertest

import "fmt"

// The Anthropic Messages streaming wire format, as api.anthropic.com sends
// it: "event: <type>\ndata: <JSON>\n\n" per event — message_start,
// content_block_start / content_block_delta / content_block_stop per
// block, ping, message_delta (stop reason, cumulative output tokens),
// message_stop; errors as an error event.

// AnthropicModel is the model the scripts report.
const AnthropicModel = "claude-sonnet-4-5-20250929"

func anthropicEvent(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

// AnthropicStart is message_start with the prompt's usage.
func AnthropicStart(input, cacheWrite, cacheRead int) string {
	return anthropicEvent("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":%s,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1,"service_tier":"standard"}}}`,
		quote(AnthropicModel), input, cacheWrite, cacheRead))
}

// AnthropicPing is the keep-alive event.
var AnthropicPing = anthropicEvent("ping", `{"type": "ping"}`)

// AnthropicTextStart opens text block index.
func AnthropicTextStart(index int) string {
	return anthropicEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, index))
}

// AnthropicText is a text_delta of block index.
func AnthropicText(index int, s string) string {
	return anthropicEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, index, quote(s)))
}

// AnthropicThinkingStart opens thinking block index.
func AnthropicThinkingStart(index int) string {
	return anthropicEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":""}}`, index))
}

// AnthropicThinking is a thinking_delta of block index.
func AnthropicThinking(index int, s string) string {
	return anthropicEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":%s}}`, index, quote(s)))
}

// AnthropicSignature is the signature_delta closing a thinking block.
func AnthropicSignature(index int, sig string) string {
	return anthropicEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"signature_delta","signature":%s}}`, index, quote(sig)))
}

// AnthropicToolStart opens tool_use block index.
func AnthropicToolStart(index int, id, name string) string {
	return anthropicEvent("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%s,"name":%s,"input":{}}}`, index, quote(id), quote(name)))
}

// AnthropicToolArgs is an input_json_delta of block index.
func AnthropicToolArgs(index int, partial string) string {
	return anthropicEvent("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, quote(partial)))
}

// AnthropicBlockStop closes block index.
func AnthropicBlockStop(index int) string {
	return anthropicEvent("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, index))
}

// AnthropicDelta is message_delta with the stop reason and the cumulative
// output tokens.
func AnthropicDelta(stop string, output int) string {
	return anthropicEvent("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%s,"stop_sequence":null},"usage":{"output_tokens":%d}}`, quote(stop), output))
}

// AnthropicStop ends the message.
var AnthropicStop = anthropicEvent("message_stop", `{"type":"message_stop"}`)

// AnthropicStreamError is an error event inside a 200 stream.
func AnthropicStreamError(typ, message string) string {
	return anthropicEvent("error", fmt.Sprintf(`{"type":"error","error":{"type":%s,"message":%s}}`, quote(typ), quote(message)))
}

// AnthropicError is an HTTP error response with Anthropic's error body.
func AnthropicError(status int, typ, message string, header map[string]string) Script {
	h := map[string]string{"Content-Type": "application/json", "Request-Id": "req_011CSHoEeqs5C35K2UUqR7Fy"}
	for k, v := range header {
		h[k] = v
	}
	return Script{Status: status, Header: h, Chunks: []string{
		fmt.Sprintf(`{"type":"error","error":{"type":%s,"message":%s},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`, quote(typ), quote(message))}}
}

// AnthropicStream is Stream with Anthropic's response headers.
func AnthropicStream(split int, events ...string) Script {
	s := Stream(split, events...)
	s.Header = map[string]string{"Content-Type": "text/event-stream; charset=utf-8", "Request-Id": "req_011CSHoEeqs5C35K2UUqR7Fy", "Cache-Control": "no-cache"}
	return s
}
