package conformance

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/fluffy-waffle/fluffy/conformance/fakes"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

// ProbeCassette is the provider probes (ProbeRequest) answered as the fake
// upstream answers them, as a cassette: one line per scenario, all turn 1
// (every probe opens a conversation), told apart by request_sha256. The
// suite sends it to a provider under test as its "cassette" setting, so a
// provider that plays back instead of calling an upstream (provider-replay)
// is certified on the same probes; a network provider ignores the key.
func ProbeCassette() string {
	var b strings.Builder
	b.WriteString("# fluffy cassette: the conformance suite's provider probes (conformance.ProbeRequest),\n" +
		"# answered as the suite's fake upstream (conformance/fakes) answers them.\n" +
		"# Rebuilt by TestConformanceCassetteIsTheSuiteUpstream (FLUFFY_UPDATE_CASSETTE=1).\n")
	add := func(scenario string, delay int, events []provider.Event) {
		req := ProbeRequest(scenario)
		last := req.Messages[len(req.Messages)-1]
		line := cassette.Turn{Turn: 1, RequestSHA256: cassette.RequestHash(req), Request: "user message " + cassette.Shorten(last.Content, 80), DelayMS: delay, Events: events}
		var enc bytes.Buffer
		je := json.NewEncoder(&enc)
		je.SetEscapeHTML(false)
		// A Turn of these fixed values always encodes.
		_ = je.Encode(line)
		b.Write(enc.Bytes())
	}
	endTurn := provider.Event{Done: &provider.Done{StopReason: provider.StopEndTurn, RawStopReason: "stop", Model: "fake"}}
	var text []provider.Event
	for _, d := range fakes.TextDeltas {
		text = append(text, provider.Event{TextDelta: d})
	}
	add(fakes.ScenarioText, 0, append(text, endTurn))

	call := []provider.Event{{ToolCallStart: &provider.ToolCallStart{CallID: fakes.ToolCallID, Name: fakes.ToolCallName}}}
	for _, p := range fakes.ToolArgParts {
		call = append(call, provider.Event{ToolCallDelta: &provider.ToolCallDelta{CallID: fakes.ToolCallID, ArgumentsDelta: p}})
	}
	call = append(call, provider.Event{ToolCallEnd: &provider.ToolCallEnd{CallID: fakes.ToolCallID, Name: fakes.ToolCallName, Arguments: json.RawMessage(fakes.ToolArgs())}},
		provider.Event{Done: &provider.Done{StopReason: provider.StopToolUse, RawStopReason: "tool_calls", Model: "fake"}})
	add(fakes.ScenarioToolCall, 0, call)

	// The fake's slow stream: a tick every 100 ms, 32 of them.
	var slow []provider.Event
	for range 32 {
		slow = append(slow, provider.Event{TextDelta: "tick "})
	}
	add(fakes.ScenarioSlow, 100, append(slow, endTurn))

	// The fake's HTTP 429, as provider-openai classifies it.
	add(fakes.ScenarioError, 0, []provider.Event{{Err: uerr.New(provider.CodeRateLimited, "the upstream is rate limiting requests",
		"HTTP 429 rate_limit_error: rate limit reached for fake model", "wait and retry")}})
	return b.String()
}
