// Package fakes owns the conformance suite's fake upstream model server: one
// loopback HTTP server that speaks both the OpenAI-compatible chat
// completions SSE stream (tool_call deltas) and the Anthropic Messages event
// stream (input_json_delta), driven by a scenario the suite selects. It must
// not reach the network and holds no state beyond the current scenario and
// what it observed.
package fakes
