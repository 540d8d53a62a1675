// Package providertest is the local fake of the AI providers' remote APIs
// for tests: an HTTP server on 127.0.0.1 that answers each request with a
// scripted response written byte for byte (status, headers, then the body
// in the given chunks, each flushed on its own, so chunk boundaries can
// fall in the middle of JSON), and records what it was asked.
//
// The scripts in openai.go and anthropic.go reproduce the services' wire
// formats (server-sent events as the services send them). It is test
// support: nothing in the product imports it.
package providertest
