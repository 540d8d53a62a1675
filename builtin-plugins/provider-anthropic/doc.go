// Command provider-anthropic is the builtin AI-provider plugin for the
// Anthropic Messages API: it streams a turn (stream: true) through the
// official anthropic-sdk-go (request execution and event-stream decoder,
// the SDK's environment defaults and retries off; each event's JSON is
// decoded into the plugin's own type, which is several times cheaper than
// the SDK's reflection decoder) and normalizes the events
// (message_start, content_block_start/delta/stop with text_delta,
// input_json_delta, thinking_delta and signature_delta, message_delta with
// the stop reason and cumulative usage, message_stop, ping, error) into
// provider events; the turn is whole at message_stop, even when it ends the
// body without a blank line, and a body that is one message JSON document
// (a server ignoring stream: true) is read as that answer. Thinking blocks are kept apart from the answer and their
// signatures sent back unchanged. Failures before any output are retried
// (upstream.Retry, x-should-retry honoured).
//
// It reaches the upstream only through the kernel's CONNECT proxy when it
// runs in its ai-provider sandbox; its base URL, API key, default model and
// retry tuning arrive at Configure ({"base_url","api_key","model","retry"}).
// The key is never logged or put in an error.
package main
