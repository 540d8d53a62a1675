package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// scripted is a Model that answers each turn from a script; a turn
// function sees the request (so a test can react to tool results).
type scripted struct {
	mu       sync.Mutex
	turns    []func(req provider.ChatRequest) []provider.Event
	requests []provider.ChatRequest
	// summary answers summary requests (no tools in the request).
	summary  func(req provider.ChatRequest) string
	nSummary int
	// summaryAt records after how many turn requests each summary came.
	summaryAt []int
	delay     time.Duration
}

func (s *scripted) Chat(ctx context.Context, req provider.ChatRequest, on func(provider.Event)) error {
	s.mu.Lock()
	if len(req.Tools) == 0 && strings.HasPrefix(req.System, "You summarize") {
		s.nSummary++
		s.summaryAt = append(s.summaryAt, len(s.requests))
		text := "summary"
		if s.summary != nil {
			text = s.summary(req)
		}
		s.mu.Unlock()
		on(provider.Event{TextDelta: text})
		on(provider.Event{Done: &provider.Done{StopReason: provider.StopEndTurn}})
		return nil
	}
	s.requests = append(s.requests, req)
	n := len(s.requests)
	s.mu.Unlock()
	if n > len(s.turns) {
		return uerr.New("SCRIPT_END", fmt.Sprintf("no scripted turn %d", n), "", "")
	}
	for _, e := range s.turns[n-1](req) {
		if s.delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(s.delay):
			}
		}
		on(e)
	}
	return ctx.Err()
}

func text(s string) func(provider.ChatRequest) []provider.Event {
	return func(provider.ChatRequest) []provider.Event {
		return []provider.Event{{TextDelta: s}, {Usage: &provider.Usage{InputTokens: 100, OutputTokens: 10}}, {Done: &provider.Done{StopReason: provider.StopEndTurn}}}
	}
}

type tc struct{ id, name, args string }

// reqTokens is what a real provider would report for req (~4 bytes a
// token), so the agent's calibration sees realistic numbers.
func reqTokens(req provider.ChatRequest) int64 {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content) + 16
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	return int64(n / 4)
}

func calls(cs ...tc) func(provider.ChatRequest) []provider.Event {
	return func(req provider.ChatRequest) []provider.Event {
		var evs []provider.Event
		for _, c := range cs {
			evs = append(evs,
				provider.Event{ToolCallStart: &provider.ToolCallStart{CallID: c.id, Name: c.name}},
				provider.Event{ToolCallDelta: &provider.ToolCallDelta{CallID: c.id, ArgumentsDelta: c.args}},
				provider.Event{ToolCallEnd: &provider.ToolCallEnd{CallID: c.id, Name: c.name, Arguments: json.RawMessage(c.args)}})
		}
		return append(evs, provider.Event{Usage: &provider.Usage{InputTokens: reqTokens(req), OutputTokens: 20}}, provider.Event{Done: &provider.Done{StopReason: provider.StopToolUse}})
	}
}

// memTools is an in-memory tool set: fs.read/fs.write on a map, a slow
// read for concurrency, and a failing call.
type memTools struct {
	mu       sync.Mutex
	files    map[string]string
	running  atomic.Int32
	maxPar   atomic.Int32
	order    []string
	readWait time.Duration
	wf       *memWorkflow
}

func (m *memTools) List() []Tool {
	return []Tool{
		{Name: "fs.read", Summary: "read a file", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "fs.write", Summary: "write a file", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "plan.complete", Summary: "finish planning", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
}

func pathOf(args json.RawMessage) string {
	var a struct{ Path string }
	_ = json.Unmarshal(args, &a)
	return a.Path
}

func (m *memTools) Access(name string, args json.RawMessage) Access {
	switch name {
	case "fs.read":
		return Access{Reads: []string{pathOf(args)}}
	case "fs.write":
		return Access{Writes: []string{pathOf(args)}}
	}
	return Access{Exclusive: true}
}

func (m *memTools) Call(ctx context.Context, id, name string, args json.RawMessage) ToolResult {
	n := m.running.Add(1)
	defer m.running.Add(-1)
	for {
		old := m.maxPar.Load()
		if n <= old || m.maxPar.CompareAndSwap(old, n) {
			break
		}
	}
	p := pathOf(args)
	m.mu.Lock()
	m.order = append(m.order, name+" "+p)
	m.mu.Unlock()
	switch name {
	case "fs.read":
		if m.readWait > 0 {
			time.Sleep(m.readWait)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		c, ok := m.files[p]
		if !ok {
			return ToolResult{Err: uerr.New("NOT_FOUND", p+" does not exist", "", "")}
		}
		out, _ := json.Marshal(map[string]string{"content": c})
		return ToolResult{OK: true, Output: out, Target: p}
	case "fs.write":
		var a struct{ Path, Content string }
		_ = json.Unmarshal(args, &a)
		time.Sleep(20 * time.Millisecond)
		m.mu.Lock()
		m.files[a.Path] = a.Content
		m.mu.Unlock()
		return ToolResult{OK: true, Output: json.RawMessage(`{"ok":true}`), Target: a.Path, Changes: []string{a.Path}}
	case "plan.complete":
		m.wf.set("test_writing")
		return ToolResult{OK: true, Output: json.RawMessage(`{"state":"test_writing"}`)}
	}
	return ToolResult{Err: uerr.New("UNKNOWN_TOOL", "no tool "+name, "", "")}
}

type memWorkflow struct {
	mu    sync.Mutex
	state string
	// changed: files already in the session's changeset.
	changed int
}

func (w *memWorkflow) set(s string) { w.mu.Lock(); w.state = s; w.mu.Unlock() }
func (w *memWorkflow) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Status{State: w.state, Mode: "strict", Writable: "test files only", Changed: w.changed}
}
func (w *memWorkflow) Start(context.Context, string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state == "idle" || w.state == "" {
		w.state = "planning"
	}
	return nil
}

type finishWhen struct{ state string }

func (f finishWhen) Reached(context.Context, func(Event)) (Finish, error) { return Finish{}, nil }

type recorder struct {
	mu  sync.Mutex
	evs []Event
}

func (r *recorder) emit(e Event) { r.mu.Lock(); r.evs = append(r.evs, e); r.mu.Unlock() }
func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		out = append(out, e.Type)
	}
	return out
}

func newTestAgent(m Model, files map[string]string) (*Agent, *memTools, *memWorkflow, *recorder) {
	wf := &memWorkflow{state: "idle"}
	tools := &memTools{files: files, wf: wf}
	rec := &recorder{}
	a := New(Options{Session: "s1", Model: m, Tools: tools, Workflow: wf, Emit: rec.emit})
	return a, tools, wf, rec
}

func TestLoopRunsCallsFeedsResultsAndEnds(t *testing.T) {
	m := &scripted{turns: []func(provider.ChatRequest) []provider.Event{
		calls(tc{"c1", "fs.read", `{"path":"a.go"}`}),
		func(req provider.ChatRequest) []provider.Event {
			last := req.Messages[len(req.Messages)-1]
			if last.Role != provider.RoleTool || !strings.Contains(last.Content, "package a") {
				return []provider.Event{{Err: uerr.New("TEST", "tool result not fed back: "+last.Content, "", "")}}
			}
			return calls(tc{"c2", "plan.complete", `{"plan":"p"}`})(req)
		},
		text("All done."),
	}}
	a, _, wf, rec := newTestAgent(m, map[string]string{"a.go": "package a"})
	wf.state = "idle"
	done := a.Run(context.Background(), "do it")
	// Planning → test_writing and then the model stopped: it is nudged,
	// and the script has no more turns, so the task fails on the script.
	if done.Status != StatusFailed && done.Status != StatusStopped {
		t.Fatalf("done = %+v", done)
	}
	types := strings.Join(rec.types(), ",")
	for _, want := range []string{"task_started", "tool_call_start", "tool_executing", "tool_result", "state_changed", "done"} {
		if !strings.Contains(types, want) {
			t.Fatalf("events %s lack %s", types, want)
		}
	}
	if rec.evs[len(rec.evs)-1].Type != EventDone {
		t.Fatal("done is not the last event")
	}
	for i, e := range rec.evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	sys := m.requests[0].System
	if !strings.Contains(sys, "state planning") || !strings.Contains(sys, "fs.read: read a file") {
		t.Fatalf("system prompt lacks workflow/tools:\n%s", sys)
	}
	if len(m.requests[0].Tools) != 3 || m.requests[0].Tools[0].Parameters == nil {
		t.Fatal("schemas not sent through function calling")
	}
}

func TestIdleAnswerIsDone(t *testing.T) {
	m := &scripted{turns: []func(provider.ChatRequest) []provider.Event{text("Here is the answer.")}}
	a, _, wf, _ := newTestAgent(m, nil)
	wf.state = "idle"
	a.o.Workflow = idleWorkflow{}
	done := a.Run(context.Background(), "what does this do?")
	if done.Status != StatusDone || done.Summary != "Here is the answer." {
		t.Fatalf("done = %+v", done)
	}
}

type idleWorkflow struct{}

func (idleWorkflow) Status() Status                      { return Status{State: "idle", Mode: "strict"} }
func (idleWorkflow) Start(context.Context, string) error { return nil }

func TestParallelReadsAndOrderedWrites(t *testing.T) {
	files := map[string]string{}
	var reads []tc
	for i := range 8 {
		p := fmt.Sprintf("f%d.go", i)
		files[p] = "x"
		reads = append(reads, tc{fmt.Sprintf("r%d", i), "fs.read", fmt.Sprintf(`{"path":%q}`, p)})
	}
	m := &scripted{turns: []func(provider.ChatRequest) []provider.Event{
		calls(reads...),
		calls(tc{"w", "fs.write", `{"path":"f0.go","content":"new"}`}, tc{"r", "fs.read", `{"path":"f0.go"}`}),
		text("ok"),
	}}
	a, tools, _, _ := newTestAgent(m, files)
	a.o.Workflow = idleWorkflow{}
	tools.readWait = 100 * time.Millisecond
	start := time.Now()
	a.Run(context.Background(), "read all")
	if tools.maxPar.Load() < 8 {
		t.Fatalf("8 reads of one turn ran at most %d at a time", tools.maxPar.Load())
	}
	_ = start
	// The read of f0.go in turn 2 must see the write that came first.
	req := m.requests[2]
	var last provider.Message
	for _, msg := range req.Messages {
		if msg.ToolCallID == "r" {
			last = msg
		}
	}
	if !strings.Contains(last.Content, "new") {
		t.Fatalf("read after write of one path did not run in order: %q (order %v)", last.Content, tools.order)
	}
}

func TestFutilityStopsARepeatedFailingCall(t *testing.T) {
	var turns []func(provider.ChatRequest) []provider.Event
	for i := range 50 {
		turns = append(turns, calls(tc{fmt.Sprintf("c%d", i), "fs.read", `{"path":"missing.go"}`}))
	}
	m := &scripted{turns: turns}
	a, _, _, _ := newTestAgent(m, map[string]string{})
	done := a.Run(context.Background(), "read it")
	if done.Status != StatusStopped || !strings.Contains(done.Reason, "same fs.read call 3 times") || !strings.Contains(done.Reason, "missing.go") {
		t.Fatalf("done = %+v", done)
	}
	if n := len(m.requests); n != 3 {
		t.Fatalf("stopped after %d turns, want 3 (well before the 50-turn cap)", n)
	}
	// The model was warned at the second repeat.
	warned := false
	for _, msg := range m.requests[2].Messages {
		if strings.Contains(msg.Content, "already returned this exact result") {
			warned = true
		}
	}
	if !warned {
		t.Fatal("the model was not told it repeats itself")
	}
}

func TestBadModelOutputIsAToolErrorAndTheLoopGoesOn(t *testing.T) {
	m := &scripted{turns: []func(provider.ChatRequest) []provider.Event{
		func(provider.ChatRequest) []provider.Event {
			return []provider.Event{
				{ToolCallStart: &provider.ToolCallStart{CallID: "bad", Name: "fs.write"}},
				{ToolCallDelta: &provider.ToolCallDelta{CallID: "bad", ArgumentsDelta: `{"path":`}},
				{ToolCallEnd: &provider.ToolCallEnd{CallID: "bad", Name: "fs.write", Arguments: json.RawMessage("{}"), RawArguments: `{"path":`,
					Invalid: uerr.New(provider.CodeInvalidToolCall, "the arguments were cut off", "max_tokens", "write smaller pieces")}},
				{Done: &provider.Done{StopReason: provider.StopMaxTokens}},
			}
		},
		calls(tc{"u", "no.such", `{}`}),
		text("giving up"),
	}}
	a, tools, _, _ := newTestAgent(m, map[string]string{})
	a.o.Workflow = idleWorkflow{}
	done := a.Run(context.Background(), "write")
	if done.Status != StatusDone {
		t.Fatalf("done = %+v", done)
	}
	if len(tools.order) != 1 || tools.order[0] != "no.such " {
		t.Fatalf("the invalid call was executed: %v", tools.order)
	}
	msgs := m.requests[1].Messages
	if last := msgs[len(msgs)-1]; !last.IsError || !strings.Contains(last.Content, "cut off") {
		t.Fatalf("invalid call result: %+v", last)
	}
	msgs = m.requests[2].Messages
	if last := msgs[len(msgs)-1]; !last.IsError || !strings.Contains(last.Content, "UNKNOWN_TOOL") {
		t.Fatalf("unknown tool result: %+v", last)
	}
}

func TestTurnLimit(t *testing.T) {
	var turns []func(provider.ChatRequest) []provider.Event
	for i := range 10 {
		turns = append(turns, calls(tc{fmt.Sprintf("c%d", i), "fs.write", fmt.Sprintf(`{"path":"f%d","content":"x"}`, i)}))
	}
	m := &scripted{turns: turns}
	a, _, _, _ := newTestAgent(m, map[string]string{})
	a.o.Limits.MaxTurns = 4
	done := a.Run(context.Background(), "write many")
	if done.Status != StatusStopped || !strings.Contains(done.Reason, "4 turns") || ExitCode(done.Status) != 3 {
		t.Fatalf("done = %+v", done)
	}
	if len(done.Files) != 4 {
		t.Fatalf("files = %v", done.Files)
	}
}

func TestCancelEndsWithinASecond(t *testing.T) {
	m := &scripted{delay: 50 * time.Millisecond, turns: []func(provider.ChatRequest) []provider.Event{
		func(provider.ChatRequest) []provider.Event {
			var evs []provider.Event
			for range 1000 {
				evs = append(evs, provider.Event{TextDelta: "word "})
			}
			return append(evs, provider.Event{Done: &provider.Done{StopReason: provider.StopEndTurn}})
		},
	}}
	a, _, _, _ := newTestAgent(m, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	done := a.Run(ctx, "talk")
	if done.Status != StatusCancelled {
		t.Fatalf("done = %+v", done)
	}
	if d := time.Since(start) - 300*time.Millisecond; d > time.Second {
		t.Fatalf("cancellation took %s", d)
	}
}

// TestCancelWithCause: a task whose context the kernel cancels with a
// structured cause (its database refusing writes on a full disk) fails
// with that error, shown to the user; a plain cancel, or one whose cause
// is not structured, stays the user's cancel.
func TestCancelWithCause(t *testing.T) {
	full := uerr.New("DISK_FULL", "the disk is nearly full", "1 MiB free", "free space, then `fluffy session resume`")
	for _, tc := range []struct {
		name   string
		cause  error
		status string
		code   string
	}{
		{"structured cause", full, StatusFailed, "DISK_FULL"},
		{"plain cancel", nil, StatusCancelled, ""},
		{"unstructured cause", errors.New("gone"), StatusCancelled, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &scripted{delay: 50 * time.Millisecond, turns: []func(provider.ChatRequest) []provider.Event{
				func(provider.ChatRequest) []provider.Event {
					var evs []provider.Event
					for range 1000 {
						evs = append(evs, provider.Event{TextDelta: "word "})
					}
					return append(evs, provider.Event{Done: &provider.Done{StopReason: provider.StopEndTurn}})
				},
			}}
			a, _, _, rec := newTestAgent(m, nil)
			ctx, cancel := context.WithCancelCause(context.Background())
			time.AfterFunc(200*time.Millisecond, func() { cancel(tc.cause) })
			done := a.Run(ctx, "talk")
			if done.Status != tc.status {
				t.Fatalf("done = %+v, want status %s", done, tc.status)
			}
			var code string
			rec.mu.Lock()
			for _, ev := range rec.evs {
				if ev.Type == EventError && ev.Error != nil {
					code = ev.Error.Code
				}
			}
			rec.mu.Unlock()
			if code != tc.code || (tc.code != "" && !strings.Contains(done.Reason, "nearly full")) {
				t.Fatalf("error event code %q, reason %q; want code %q", code, done.Reason, tc.code)
			}
		})
	}
}

// TestContextStaysUnderBudgetAndSummarizesOnce: a 200-turn synthetic
// conversation never sends more than the budget; the summary request
// happens once each time the history crosses the threshold (never on two
// turns in a row: the summary makes room), and pins survive.
func TestContextStaysUnderBudgetAndSummarizesOnce(t *testing.T) {
	big := strings.Repeat("lorem ipsum ", 200) // ~600 tokens per read result
	var turns []func(provider.ChatRequest) []provider.Event
	for i := range 200 {
		turns = append(turns, calls(tc{fmt.Sprintf("c%d", i), "fs.write", fmt.Sprintf(`{"path":"f%d.go","content":%q}`, i, big)}))
	}
	m := &scripted{turns: turns}
	a, _, _, _ := newTestAgent(m, map[string]string{})
	a.o.ContextWindow = 60000
	a.o.Limits.MaxTurns = 200
	a.o.Brief = func(touched []string) string {
		return fmt.Sprintf("PROJECT-BRIEF (%d paths touched, first %v)\n", len(touched), touched[:min(1, len(touched))])
	}
	a.Pin("always use tabs")
	done := a.Run(context.Background(), "long task")
	if done.Status != StatusStopped || !strings.Contains(done.Reason, "200 turns") {
		t.Fatalf("done = %+v", done)
	}
	budget := a.historyBudget(m.requests[0].System, 0)
	for i, req := range m.requests {
		if got := a.est.messages(req.Messages); got > budget {
			t.Fatalf("request %d carries %d tokens of history, budget %d", i, got, budget)
		}
		if !strings.Contains(req.System, "always use tabs") {
			t.Fatalf("request %d lost the pin", i)
		}
		// The project's instructions and overview stand in every request,
		// after every summary too, and follow the paths the task touched.
		if !strings.Contains(req.System, "PROJECT-BRIEF") || i > 0 && !strings.Contains(req.System, "first [f0.go]") {
			t.Fatalf("request %d does not carry the brief:\n%.400s", i, req.System)
		}
	}
	// ~600 tokens a turn, 200 turns, a ~50k history budget: the history
	// crosses 70 % a few times, each time summarized once.
	if m.nSummary < 1 || m.nSummary > 6 {
		t.Fatalf("%d summary requests (at turns %v)", m.nSummary, m.summaryAt)
	}
	for i := 1; i < len(m.summaryAt); i++ {
		if m.summaryAt[i]-m.summaryAt[i-1] < 10 {
			t.Fatalf("summaries at turns %v: one crossing summarized more than once", m.summaryAt)
		}
	}
	if m.summaryAt[0] < 40 {
		t.Fatalf("first summary at turn %d, before the history could reach 70 %% of its budget", m.summaryAt[0])
	}
	last := m.requests[len(m.requests)-1].Messages
	if !strings.HasPrefix(last[0].Content, "Summary of the conversation so far") {
		t.Fatal("the summary is not carried in later requests")
	}
}

func TestEstimatorCalibrates(t *testing.T) {
	e := newEstimator()
	est := e.text(strings.Repeat("x", 4000)) // ~1000
	for range 10 {
		e.calibrate(e.text(strings.Repeat("x", 4000)), 2000)
	}
	if got := e.text(strings.Repeat("x", 4000)); got < 1800 || got > 2200 || est != 1000 {
		t.Fatalf("calibrated estimate %d (was %d), want ~2000", got, est)
	}
}

// TestConversationCarriesToAnotherAgent: what Conversation returns,
// through JSON (as the kernel stores it), lets a new agent (a restarted
// kernel, a resumed session) continue: its next request carries the
// earlier task, the model's answer and the pin.
func TestConversationCarriesToAnotherAgent(t *testing.T) {
	m := &scripted{turns: []func(provider.ChatRequest) []provider.Event{text("It parses the config.")}}
	a, _, _, _ := newTestAgent(m, nil)
	a.o.Workflow = idleWorkflow{}
	a.Pin("always use tabs")
	if done := a.Run(context.Background(), "what does parseConfig do?"); done.Status != StatusDone {
		t.Fatalf("done = %+v", done)
	}
	b, err := json.Marshal(a.Conversation())
	if err != nil {
		t.Fatal(err)
	}
	var c Conversation
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	m2 := &scripted{turns: []func(provider.ChatRequest) []provider.Event{text("Yes.")}}
	next, _, _, _ := newTestAgent(m2, nil)
	next.o.Workflow = idleWorkflow{}
	next.Restore(c)
	if done := next.Run(context.Background(), "and does it handle errors?"); done.Status != StatusDone {
		t.Fatalf("done = %+v", done)
	}
	req := m2.requests[0]
	var all []string
	for _, msg := range req.Messages {
		all = append(all, msg.Role+": "+msg.Content)
	}
	got := strings.Join(all, "\n")
	for _, want := range []string{"user: what does parseConfig do?", "assistant: It parses the config.", "user: and does it handle errors?"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the resumed request lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(req.System, "always use tabs") {
		t.Fatal("the pin was not restored")
	}
}

// TestSpentProviderRetriesAreNotRepeated: a retryable turn error is retried
// by the loop unless the provider says it already spent its own retries
// on it (RetriesSpent); then the task fails at once, and the reason still
// says the failure is passing.
func TestSpentProviderRetriesAreNotRepeated(t *testing.T) {
	overloaded := func(spent bool) func(provider.ChatRequest) []provider.Event {
		return func(provider.ChatRequest) []provider.Event {
			return []provider.Event{{Err: provider.NewError(provider.CodeOverloaded, "OpenAI is overloaded", "529", "retry in a moment",
				provider.RetryInfo{Retryable: true, HTTPStatus: 529, Attempts: 3, RetriesSpent: spent})}}
		}
	}
	for _, tc := range []struct {
		spent    bool
		requests int
		status   string
	}{{false, 2, StatusDone}, {true, 1, StatusFailed}} {
		m := &scripted{turns: []func(provider.ChatRequest) []provider.Event{overloaded(tc.spent), text("answer")}}
		a, _, _, _ := newTestAgent(m, nil)
		a.o.Workflow = idleWorkflow{}
		done := a.Run(context.Background(), "what does this do?")
		if len(m.requests) != tc.requests || done.Status != tc.status {
			t.Fatalf("spent=%v: %d requests, done %+v; want %d requests, %s", tc.spent, len(m.requests), done, tc.requests, tc.status)
		}
		if tc.spent && !strings.Contains(done.Reason, "sent the request 3 times; try again later") {
			t.Fatalf("reason %q", done.Reason)
		}
	}
}

// TestExhaustedTurnRetriesSayItPasses: a retryable failure the plugin
// did not retry itself (a stream that broke off after text) is repeated
// by the loop three times; then the task fails, and the reason says the
// failure is passing, not only the plugin's "retry the turn".
func TestExhaustedTurnRetriesSayItPasses(t *testing.T) {
	broke := func(provider.ChatRequest) []provider.Event {
		return []provider.Event{{TextDelta: "Let me"}, {Err: provider.NewError(provider.CodeStreamIncomplete, "OpenAI's stream broke off", "unexpected EOF", "retry the turn",
			provider.RetryInfo{Retryable: true, Attempts: 1})}}
	}
	m := &scripted{turns: []func(provider.ChatRequest) []provider.Event{broke, broke, broke, broke, text("never asked")}}
	a, _, _, _ := newTestAgent(m, nil)
	a.o.Workflow = idleWorkflow{}
	done := a.Run(context.Background(), "what does this do?")
	if len(m.requests) != 4 || done.Status != StatusFailed || !strings.Contains(done.Reason, "tried 4 times; try again later") {
		t.Fatalf("%d requests, done %+v; want 4 requests and a failure that says it passes", len(m.requests), done)
	}
}

// A cost limit acts once the model's prices are known: each turn's usage
// is priced, the budget events carry the turn's and the task's cost, and
// the task stops with the limit named and how to go on.
func TestCostLimit(t *testing.T) {
	var turns []func(provider.ChatRequest) []provider.Event
	for i := range 10 {
		turns = append(turns, calls(tc{fmt.Sprintf("c%d", i), "fs.write", fmt.Sprintf(`{"path":"f%d","content":"x"}`, i)}))
	}
	a, _, _, rec := newTestAgent(&scripted{turns: turns}, map[string]string{})
	// $1 a turn, whatever the usage: the limit of $2.50 stops the third.
	a.o.Limits.Cost = func(provider.Usage) float64 { return 1 }
	a.o.Limits.MaxCostUSD = 2.5
	done := a.Run(context.Background(), "write many")
	if done.Status != StatusStopped || !strings.Contains(done.Reason, "$3.0000") || !strings.Contains(done.Reason, "--max-cost") || done.CostUSD != 3 {
		t.Fatalf("done = %+v", done)
	}
	var last *BudgetEvent
	for _, e := range rec.evs {
		if e.Budget != nil && e.Budget.TurnCostUSD > 0 {
			last = e.Budget
		}
	}
	if last == nil || last.TurnCostUSD != 1 || last.CostUSD != 3 || !last.CostKnown {
		t.Fatalf("last priced budget event: %+v", last)
	}
	// Without prices no cost is counted and the limit cannot act.
	a2, _, _, _ := newTestAgent(&scripted{turns: turns[:3]}, map[string]string{})
	a2.o.Limits.MaxCostUSD = 0.01
	if done := a2.Run(context.Background(), "write"); done.Status == StatusStopped || done.CostUSD != 0 {
		t.Fatalf("unpriced: %+v", done)
	}
}

// A server that gives the model less context than the request needs is
// named before the request goes out, once a task, with the fix.
func TestServerWindowIsWarnedBeforeSending(t *testing.T) {
	turns := []func(provider.ChatRequest) []provider.Event{
		calls(tc{"c1", "fs.read", `{"path":"a.go"}`}),
		calls(tc{"c2", "fs.read", `{"path":"a.go"}`}),
	}
	m := &scripted{turns: turns}
	a, _, _, rec := newTestAgent(m, map[string]string{"a.go": strings.Repeat("x", 4000)})
	a.SetModel(TaskModel{Name: "qwen3", ContextWindow: 40960, ServerWindow: 50, ServerWindowFix: "Start Ollama with OLLAMA_CONTEXT_LENGTH=32768."})
	a.Run(context.Background(), "read it")
	var notices []int
	for i, e := range rec.evs {
		if e.Type == EventNotice && strings.Contains(e.Text, "50-token context the server gives qwen3") && strings.Contains(e.Text, "OLLAMA_CONTEXT_LENGTH") {
			notices = append(notices, i)
		}
	}
	if len(notices) != 1 || len(m.requests) == 0 {
		t.Fatalf("%d window notices, %d requests", len(notices), len(m.requests))
	}
	// The notice precedes the first turn's events.
	for _, e := range rec.evs[:notices[0]] {
		if e.Type == EventToolResult {
			t.Fatal("the notice came after a turn had run")
		}
	}
}
