// Command provider-replay is the builtin AI-provider plugin that plays back
// a cassette (plugins/provider/cassette): turn N of a conversation is
// answered with the events recorded for turn N, checked against the
// request's hash when the cassette has one. It makes the product run
// offline and deterministically (tests, the demo).
//
// The cassette arrives in Configure, inline in the plugin's config JSON
// ({"cassette": "<the JSONL text>"}); the plugin reads no files and opens
// no network connections.
package main
