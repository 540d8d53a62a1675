package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/conformance/fakes"
	"github.com/fluffy-waffle/fluffy/internal/kerneltest"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// suiteCassette is the conformance cassette built from the suite's own
// probe requests and the answers its fake upstream scripts: one line per
// scenario, all turn 1 (every probe opens a conversation), told apart by
// request_sha256.
func suiteCassette(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# fluffy cassette: the conformance suite's provider probes (conformance.ProbeRequest),\n" +
		"# answered as the suite's fake upstream (conformance/fakes) answers them.\n" +
		"# Rebuilt by TestConformanceCassetteIsTheSuiteUpstream (FLUFFY_UPDATE_CASSETTE=1).\n")
	add := func(scenario string, delay int, events []provider.Event) {
		req := conformance.ProbeRequest(scenario)
		last := req.Messages[len(req.Messages)-1]
		line := cassette.Turn{Turn: 1, RequestSHA256: cassette.RequestHash(req), Request: "user message " + cassette.Shorten(last.Content, 80), DelayMS: delay, Events: events}
		var enc bytes.Buffer
		je := json.NewEncoder(&enc)
		je.SetEscapeHTML(false)
		if err := je.Encode(line); err != nil {
			t.Fatal(err)
		}
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

// TestConformanceCassetteIsTheSuiteUpstream: the shipped conformance
// cassette is exactly what the suite's probes and fake upstream make, and
// it parses.
func TestConformanceCassetteIsTheSuiteUpstream(t *testing.T) {
	want := suiteCassette(t)
	if os.Getenv("FLUFFY_UPDATE_CASSETTE") == "1" {
		if err := os.WriteFile("conformance.jsonl", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if conformanceCassette != want {
		t.Fatalf("conformance.jsonl is not the suite's probes and answers; rebuild it with FLUFFY_UPDATE_CASSETTE=1 go test -run %s ./builtin-plugins/provider-replay/\n%s", t.Name(), want)
	}
	if _, err := cassette.Parse(strings.NewReader(conformanceCassette)); err != nil {
		t.Fatal(err)
	}
}

// TestConformanceProviderProfile: with its shipped conformance cassette
// (`fluffy conformance run … --config '{"builtin_cassette":"conformance"}'`)
// provider-replay is certified on the core and provider profiles: the
// probes get the suite's text, tool call and error, a cancelled slow
// stream stops, and PROVIDER-PROXY-001 does not apply (no network is
// declared and no connection was made).
func TestConformanceProviderProfile(t *testing.T) {
	rep := kerneltest.ConformanceConfig(t, "builtin-plugins/provider-replay", json.RawMessage(`{"builtin_cassette":"conformance"}`), conformance.ProfileCore, conformance.ProfileProvider)
	if !rep.Passed() {
		t.Fatalf("not certified: %s", rep.Summary())
	}
	for id, want := range map[string]conformance.Status{"PROVIDER-STREAM-001": conformance.Pass, "PROVIDER-TOOLCALL-001": conformance.Pass,
		"PROVIDER-CANCEL-001": conformance.Pass, "PROVIDER-ERROR-001": conformance.Pass, "PROVIDER-PROXY-001": conformance.NotApplicable,
		"CORE-SANDBOX-001": conformance.Pass} {
		if r, ok := rep.Result(id); !ok || r.Status != want {
			t.Errorf("%s: %s %s, want %s", id, r.Status, r.Message, want)
		}
	}
}
