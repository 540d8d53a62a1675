// Command provider-openai is the builtin AI-provider plugin for the OpenAI
// Chat Completions API and servers compatible with it. It streams a turn
// (stream: true, stream_options.include_usage) through the official
// openai-go SDK (request execution and event-stream decoder, the SDK's
// environment defaults and retries off; each chunk's JSON is decoded into
// the plugin's own type, which keeps raw what the SDK's type loses and is
// several times cheaper than its reflection decoder) and normalizes the
// chunks, with their quirks, into provider events. A turn is whole once a
// finish_reason arrived ([DONE] may be missing, or end the body without a
// blank line); a body that is one chat.completion JSON document (a server
// ignoring stream: true) is read as that answer. Failures before any output
// are retried (upstream.Retry).
//
// It reaches the upstream only through the kernel's CONNECT proxy when it
// runs in its ai-provider sandbox; its base URL, API key, default model and
// retry tuning arrive at Configure ({"base_url","api_key","model","retry"}).
// The key is never logged or put in an error.
package main
