package cassette

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

func user(s string) provider.Message { return provider.Message{Role: provider.RoleUser, Content: s} }

// textTurn and toolTurn are the two kinds of answers a cassette holds.
var (
	textTurn = []provider.Event{{TextDelta: "Hel"}, {TextDelta: "lo"}, {Usage: &provider.Usage{InputTokens: 10, OutputTokens: 2}}, {Done: &provider.Done{StopReason: provider.StopEndTurn}}}
	toolTurn = []provider.Event{
		{ToolCallStart: &provider.ToolCallStart{CallID: "c1", Name: "fs.read"}},
		{ToolCallDelta: &provider.ToolCallDelta{CallID: "c1", ArgumentsDelta: `{"path": `}},
		{ToolCallDelta: &provider.ToolCallDelta{CallID: "c1", ArgumentsDelta: `"a.go"}`}},
		{ToolCallEnd: &provider.ToolCallEnd{CallID: "c1", Name: "fs.read", Arguments: json.RawMessage(`{"path": "a.go"}`)}},
		{Done: &provider.Done{StopReason: provider.StopToolUse}},
	}
)

func TestWriteThenParseRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	req1 := provider.ChatRequest{Messages: []provider.Message{user("read a.go")}}
	if err := w.Add(req1, toolTurn); err != nil {
		t.Fatal(err)
	}
	req2 := req1
	req2.Messages = append(append([]provider.Message(nil), req1.Messages...),
		provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "c1", Name: "fs.read", Arguments: json.RawMessage(`{"path":"a.go"}`)}}},
		provider.Message{Role: provider.RoleTool, ToolCallID: "c1", Content: "package a"})
	rec := w.Record(req2)
	var seen int
	on := rec.Observe(func(provider.Event) { seen++ })
	for _, e := range textTurn {
		on(e)
	}
	if ok, err := rec.Finish(); !ok || err != nil {
		t.Fatalf("recorder finish: %v %v", ok, err)
	}
	if seen != len(textTurn) || w.Turns() != 2 {
		t.Fatalf("seen %d turns %d", seen, w.Turns())
	}
	c, err := Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("parse what the writer wrote: %v\n%s", err, buf.String())
	}
	t1, err := c.Match(req1)
	if err != nil {
		t.Fatal(err)
	}
	// The end's arguments are the exact bytes of the deltas again, though
	// encoding/json compacted them on the way to the file.
	if got := string(t1.Events[3].ToolCallEnd.Arguments); got != `{"path": "a.go"}` {
		t.Errorf("end arguments %q", got)
	}
	t2, err := c.Match(req2)
	if err != nil || t2.Turn != 2 || t2.Events[0].TextDelta != "Hel" {
		t.Fatalf("turn 2: %+v %v", t2, err)
	}
	// A third request is past the end.
	req3 := req2
	req3.Messages = append(append([]provider.Message(nil), req2.Messages...), provider.Message{Role: provider.RoleAssistant, Content: "Hello"}, user("again"))
	if _, err := c.Match(req3); !uerr.HasCode(err, CodeExhausted) || !strings.Contains(err.Error(), "turn 3") {
		t.Fatalf("exhausted: %v", err)
	}
	// A diverging request names the turn and what it got.
	bad := req2
	bad.Messages = append(append([]provider.Message(nil), req2.Messages[:2]...), provider.Message{Role: provider.RoleTool, ToolCallID: "c9\x1b[2J", Content: "package b"})
	_, err = c.Match(bad)
	ue, ok := uerr.As(err)
	if !ok || ue.Code != CodeMismatch || !strings.Contains(ue.What, "turn 2") || !strings.Contains(ue.Why, `c9\x1b[2J`) {
		t.Fatalf("mismatch: %#v", err)
	}
	// An unfinished turn is not recorded.
	rec = w.Record(req1)
	rec.Observe(nil)(provider.Event{TextDelta: "cut"})
	if ok, err := rec.Finish(); ok || err != nil || w.Turns() != 2 {
		t.Fatalf("unfinished turn recorded: %v %v", ok, err)
	}
}

func TestParseRefusesBrokenCassettes(t *testing.T) {
	done := `{"done":{"stop_reason":"end_turn"}}`
	for _, tc := range []struct {
		name, text, want string
	}{
		{"empty", "\n# only a comment\n", "no turns"},
		{"not json", `{"turn":1,"events":[` + "\n", "line 1 is not a turn object"},
		{"unknown field", `{"turn":1,"evnts":[]}`, "unknown field"},
		{"numbering", `{"turn":2,"events":[` + done + `]}`, "line 1 is turn 2, expected turn 1"},
		{"a turn repeated later", `{"turn":1,"events":[` + done + `]}` + "\n" + `{"turn":2,"events":[` + done + `]}` + "\n" + `{"turn":1,"events":[` + done + `]}`, "line 3 is turn 1, expected turn 3"},
		{"no end", `{"turn":1,"events":[{"text_delta":"x"}]}`, "without a done or error"},
		{"after done", `{"turn":1,"events":[` + done + `,{"text_delta":"x"}]}`, "event 2"},
		{"args not json", `{"turn":1,"events":[{"tool_call_start":{"call_id":"a","name":"t"}},{"tool_call_end":{"call_id":"a","name":"t","arguments":[1]}},` + done + `]}`, "not a JSON object"},
		{"bad hash", `{"turn":1,"request_sha256":"zz","events":[` + done + `]}`, "64 hex"},
		{"delay", `{"turn":1,"delay_ms":999999,"events":[` + done + `]}`, "delay_ms"},
		{"too big", strings.Repeat(" ", MaxBytes+1), "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text))
			ue, ok := uerr.As(err)
			if !ok || ue.Code != CodeInvalid || !strings.Contains(ue.Why, tc.want) {
				t.Fatalf("got %v, want %s mentioning %q", err, CodeInvalid, tc.want)
			}
		})
	}
}

func TestWriterRefusesABrokenTurn(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	if err := w.Add(provider.ChatRequest{}, []provider.Event{{TextDelta: "no end"}}); err == nil || buf.Len() != 0 {
		t.Fatalf("wrote a turn without done: %v %q", err, buf.String())
	}
}

func TestTurnOfCountsAssistantMessages(t *testing.T) {
	req := provider.ChatRequest{Messages: []provider.Message{user("a"), {Role: provider.RoleAssistant}, {Role: provider.RoleTool}, {Role: provider.RoleAssistant}, user("b")}}
	if n := TurnOf(req); n != 3 {
		t.Fatalf("TurnOf = %d", n)
	}
	if RequestHash(req) == RequestHash(provider.ChatRequest{Messages: []provider.Message{user("c")}}) {
		t.Fatal("different last messages hash the same")
	}
}

// A recorded session replays although its test output (timings) differs
// from run to run: a tool result is identified by the call it answers, a
// prompt by its text.
func TestRequestHashIgnoresToolOutputButNotPrompts(t *testing.T) {
	tool := func(id, content string, isErr bool) provider.ChatRequest {
		return provider.ChatRequest{Messages: []provider.Message{user("task"), {Role: provider.RoleAssistant}, {Role: provider.RoleTool, ToolCallID: id, Content: content, IsError: isErr}}}
	}
	cases := []struct {
		name string
		a, b provider.ChatRequest
		same bool
	}{
		{"test timings differ", tool("c1", "ok example 0.003s", false), tool("c1", "ok example 0.005s", false), true},
		{"another call", tool("c1", "x", false), tool("c2", "x", false), false},
		{"error vs result", tool("c1", "x", false), tool("c1", "x", true), false},
		{"another prompt", provider.ChatRequest{Messages: []provider.Message{user("a")}}, provider.ChatRequest{Messages: []provider.Message{user("b")}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RequestHash(c.a) == RequestHash(c.b); got != c.same {
				t.Fatalf("same hash = %v, want %v", got, c.same)
			}
			if c.same && describe(c.a) != describe(c.b) {
				t.Fatalf("descriptions differ: %q vs %q", describe(c.a), describe(c.b))
			}
		})
	}
}

// Source code in a call's arguments (<, &, >, spaces after colons) reads
// back as the same turn: what a Writer writes, Parse reads.
func TestWriterKeepsSourceCodeArguments(t *testing.T) {
	args := `{"path": "a.go", "content": "if a < b && c > d { return <-ch }"}`
	evs := []provider.Event{
		{ToolCallStart: &provider.ToolCallStart{CallID: "c1", Name: "fs.write"}},
		{ToolCallDelta: &provider.ToolCallDelta{CallID: "c1", ArgumentsDelta: args[:20]}},
		{ToolCallDelta: &provider.ToolCallDelta{CallID: "c1", ArgumentsDelta: args[20:]}},
		{ToolCallEnd: &provider.ToolCallEnd{CallID: "c1", Name: "fs.write", Arguments: json.RawMessage(args)}},
		{Done: &provider.Done{StopReason: provider.StopToolUse}},
	}
	var buf bytes.Buffer
	if err := NewWriter(&buf).Add(provider.ChatRequest{Messages: []provider.Message{user("go")}}, evs); err != nil {
		t.Fatal(err)
	}
	c, err := Parse(&buf)
	if err != nil {
		t.Fatalf("what the writer wrote does not parse: %v", err)
	}
	if got := string(c.Turns[0].Events[3].ToolCallEnd.Arguments); got != args {
		t.Fatalf("arguments read back as %s", got)
	}
	// A line that went through encoding/json once more (the kernel's IPC
	// to the client writing --record) has < as \u003c: still the same turn.
	line, _ := json.Marshal(Turn{Turn: 1, Events: evs})
	if !bytes.Contains(line, []byte(`\u003c`)) {
		t.Fatalf("the test needs an escaped line: %s", line)
	}
	c, err = Parse(bytes.NewReader(line))
	if err != nil {
		t.Fatalf("an HTML-escaped line does not parse: %v", err)
	}
	if got := string(c.Turns[0].Events[3].ToolCallEnd.Arguments); got != args {
		t.Fatalf("escaped arguments read back as %s", got)
	}
}

// TestRepeatedTurnAnswersByHashThenInOrder: a turn with several lines
// answers each request with the line recorded for its hash, and identical
// requests with those lines in order (the last repeating); a turn with one
// line keeps no state.
func TestRepeatedTurnAnswersByHashThenInOrder(t *testing.T) {
	a := provider.ChatRequest{Messages: []provider.Message{user("say hello")}}
	b := provider.ChatRequest{Messages: []provider.Message{user("call a tool")}}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, x := range []struct {
		req  provider.ChatRequest
		text string
	}{{a, "first"}, {b, "tool"}, {a, "second"}} {
		if err := w.AddTurn(x.req, Turn{Events: []provider.Event{{TextDelta: x.text}, {Done: &provider.Done{StopReason: provider.StopEndTurn}}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The writer numbers turns 1, 2, 3: these three answer turn 1.
	text := strings.NewReplacer(`"turn":2`, `"turn":1`, `"turn":3`, `"turn":1`).Replace(buf.String())
	c, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	answer := func(req provider.ChatRequest) string {
		t.Helper()
		turn, err := c.Match(req)
		if err != nil {
			t.Fatal(err)
		}
		return turn.Events[0].TextDelta
	}
	got := []string{answer(a), answer(b), answer(a), answer(a), answer(b)}
	if want := []string{"first", "tool", "second", "second", "tool"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("answers %v, want %v", got, want)
	}
	other := provider.ChatRequest{Messages: []provider.Message{user("something else")}}
	if _, err := c.Match(other); !uerr.HasCode(err, CodeMismatch) || !strings.Contains(err.Error(), "recorded for 3 requests") {
		t.Fatalf("an unrecorded request: %v", err)
	}
}

// TestReplayAfterTheAgentSummarised: the agent's summary request carries
// no assistant message and the requests after it only the recent ones, so
// TurnOf says 1 and 2 where the recording numbered turns 3 and 4; the
// replay still answers every request as recorded, and recording the
// replay gives the same cassette.
func TestReplayAfterTheAgentSummarised(t *testing.T) {
	call := func(id string) provider.Message {
		return provider.Message{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: id, Name: "fs.read", Arguments: json.RawMessage(`{"path":"a.go"}`)}}}
	}
	result := func(id, out string) provider.Message {
		return provider.Message{Role: provider.RoleTool, ToolCallID: id, Content: out}
	}
	answer := func(text string) []provider.Event {
		return []provider.Event{{TextDelta: text}, {Done: &provider.Done{StopReason: provider.StopEndTurn}}}
	}
	readCall := func(id string) []provider.Event {
		return []provider.Event{
			{ToolCallStart: &provider.ToolCallStart{CallID: id, Name: "fs.read"}},
			{ToolCallDelta: &provider.ToolCallDelta{CallID: id, ArgumentsDelta: `{"path":"a.go"}`}},
			{ToolCallEnd: &provider.ToolCallEnd{CallID: id, Name: "fs.read", Arguments: json.RawMessage(`{"path":"a.go"}`)}},
			{Done: &provider.Done{StopReason: provider.StopToolUse}},
		}
	}
	task := user("fix a.go")
	summary := user("Summary of the conversation so far: a.go was read twice.")
	conv := []struct {
		req provider.ChatRequest
		evs []provider.Event
	}{
		{provider.ChatRequest{Messages: []provider.Message{task}}, readCall("c1")},
		{provider.ChatRequest{Messages: []provider.Message{task, call("c1"), result("c1", "package a")}}, readCall("c2")},
		// The summary request: one user message (TurnOf 1).
		{provider.ChatRequest{System: "You summarize", Messages: []provider.Message{user("Conversation to summarize:\n[user] fix a.go\n...")}}, answer("a.go was read twice.")},
		// The window after it: the summary and the recent messages (TurnOf 2).
		{provider.ChatRequest{Messages: []provider.Message{summary, call("c2"), result("c2", "package a")}}, readCall("c3")},
		{provider.ChatRequest{Messages: []provider.Message{summary, call("c2"), result("c2", "package a"), call("c3"), result("c3", "package a")}}, answer("done")},
	}
	var rec bytes.Buffer
	w := NewWriter(&rec)
	for _, x := range conv {
		if err := w.Add(x.req, x.evs); err != nil {
			t.Fatal(err)
		}
	}
	c, err := Parse(strings.NewReader(rec.String()))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	w2 := NewWriter(&again)
	for i, x := range conv {
		turn, err := c.Match(x.req)
		if err != nil {
			t.Fatalf("request %d (TurnOf %d): %v", i+1, TurnOf(x.req), err)
		}
		if turn.Turn != i+1 {
			t.Fatalf("request %d answered by turn %d", i+1, turn.Turn)
		}
		if err := w2.Add(x.req, turn.Events); err != nil {
			t.Fatal(err)
		}
	}
	if again.String() != rec.String() {
		t.Fatalf("the replay's recording differs:\n%s\n---\n%s", again.String(), rec.String())
	}
	// A request that is in no turn still fails, naming its turn.
	other := provider.ChatRequest{Messages: []provider.Message{summary, call("c2"), result("c9", "x")}}
	if _, err := c.Match(other); !uerr.HasCode(err, CodeMismatch) || !strings.Contains(err.Error(), "turn 2") {
		t.Fatalf("a diverging request: %v", err)
	}
}
