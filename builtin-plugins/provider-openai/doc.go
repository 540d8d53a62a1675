// Command provider-openai is the builtin AI-provider plugin for the OpenAI
// Chat Completions API and servers compatible with it: it streams a turn
// (stream: true, stream_options.include_usage) and normalizes the chunks,
// with their quirks, into provider events.
//
// It reaches the upstream only through the kernel's CONNECT proxy when it
// runs in its ai-provider sandbox; its base URL, API key and default model
// arrive at Configure ({"base_url","api_key","model"}). The key is never
// logged or put in an error.
package main
