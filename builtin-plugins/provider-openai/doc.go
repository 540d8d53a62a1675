// Command provider-openai is the builtin AI-provider plugin for the OpenAI
// Chat Completions API and servers compatible with it. It streams a turn
// (stream: true, stream_options.include_usage) through the official
// openai-go SDK (request execution, event decoder, chunk type; the SDK's
// environment defaults and retries off) and normalizes the chunks, with
// their quirks, into provider events, reading what the SDK's types lose
// from each chunk's raw JSON and noticing a stream that ends without
// data: [DONE]. Failures before any output are retried (upstream.Retry).
//
// It reaches the upstream only through the kernel's CONNECT proxy when it
// runs in its ai-provider sandbox; its base URL, API key, default model and
// retry tuning arrive at Configure ({"base_url","api_key","model","retry"}).
// The key is never logged or put in an error.
package main
