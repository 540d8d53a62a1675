// Package cassette owns the recorded-conversation format provider-replay
// plays back: one JSON object per line, one line per model turn, each with
// the normalized provider events (plugins/provider.Event) the turn answered
// with and, optionally, a hash of the request it expects.
//
// It parses and validates cassettes (bounded sizes, every turn's events
// checked against the provider event contract), matches a request to its
// recorded turn, and writes cassettes (Writer, Recorder) for tests and for
// recording at the kernel side.
//
// It opens no files and no network connections; it must not import host/.
package cassette
