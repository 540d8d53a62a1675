package providertest

import (
	"fmt"
	"strings"
)

// The OpenAI Chat Completions streaming wire format (stream: true,
// stream_options.include_usage: true), as api.openai.com sends it: one
// "data: <chunk JSON>\n\n" per chunk, "usage":null on every chunk but a
// last one with "choices":[], then "data: [DONE]\n\n".

const oaHead = `{"id":"chatcmpl-BfX3kYl8mQ2","object":"chat.completion.chunk","created":1749081600,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b3f1157249","choices":[`

// OpenAIModel is the model the scripts report.
const OpenAIModel = "gpt-4.1-2025-04-14"

// OpenAIDone ends a stream.
const OpenAIDone = "data: [DONE]\n\n"

// OpenAIChunk is one chunk whose choice 0 has the given delta JSON and
// finish_reason (JSON: null or a quoted string).
func OpenAIChunk(delta, finish string) string {
	return "data: " + oaHead + `{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}],"usage":null}` + "\n\n"
}

// OpenAIUsageChunk is the last chunk of an include_usage stream.
func OpenAIUsageChunk(prompt, completion, cached, reasoning int) string {
	return "data: " + oaHead + fmt.Sprintf(`],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":%d,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
		prompt, completion, prompt+completion, cached, reasoning) + "\n\n"
}

// OpenAIRole is the first chunk of a text answer.
var OpenAIRole = OpenAIChunk(`{"role":"assistant","content":"","refusal":null}`, "null")

// OpenAIText is the chunk carrying text s.
func OpenAIText(s string) string {
	return OpenAIChunk(`{"content":`+quote(s)+`}`, "null")
}

// OpenAICallStart opens tool call index with its id and name, as OpenAI
// does (arguments "" in the first chunk; the role on the first call).
func OpenAICallStart(index int, id, name string) string {
	role := ""
	if index == 0 {
		role = `"role":"assistant","content":null,`
	}
	return OpenAIChunk(fmt.Sprintf(`{%s"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}],"refusal":null}`, role, index, quote(id), quote(name)), "null")
}

// OpenAICallArgs is an argument fragment of call index.
func OpenAICallArgs(index int, fragment string) string {
	return OpenAIChunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, index, quote(fragment)), "null")
}

// OpenAIFinish is the chunk carrying the finish reason.
func OpenAIFinish(reason string) string { return OpenAIChunk(`{}`, quote(reason)) }

// OpenAIError is an HTTP error response with OpenAI's error body.
func OpenAIError(status int, typ, code, message string, header map[string]string) Script {
	c := "null"
	if code != "" {
		c = quote(code)
	}
	h := map[string]string{"Content-Type": "application/json; charset=utf-8", "X-Request-Id": "req_8c1f0e2b7d"}
	for k, v := range header {
		h[k] = v
	}
	return Script{Status: status, Header: h, Chunks: []string{
		fmt.Sprintf("{\n  \"error\": {\n    \"message\": %s,\n    \"type\": %s,\n    \"param\": null,\n    \"code\": %s\n  }\n}\n", quote(message), quote(typ), c)}}
}

// Stream makes a 200 event-stream script of the given SSE text, cut into
// pieces of at most split bytes (0: one chunk per event), so boundaries
// fall in the middle of lines and JSON.
func Stream(split int, events ...string) Script {
	h := map[string]string{"Content-Type": "text/event-stream; charset=utf-8", "X-Request-Id": "req_5e2d9a1c44", "Cache-Control": "no-cache"}
	if split <= 0 {
		return Script{Header: h, Chunks: events}
	}
	all := strings.Join(events, "")
	var chunks []string
	for len(all) > split {
		chunks = append(chunks, all[:split])
		all = all[split:]
	}
	return Script{Header: h, Chunks: append(chunks, all)}
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
