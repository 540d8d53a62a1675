package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/toolcall"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// DefaultMaxTurns is the turn cap.
const DefaultMaxTurns = 50

// maxNudges: how often the model is told the task is not finished when it
// ends a turn without a tool call mid-workflow, before the task stops.
const maxNudges = 2

// answeredReason is the done reason of a task the model answered.
const answeredReason = "nothing changed."

// Options configure a session's agent.
type Options struct {
	Session   string
	Model     Model
	ModelName string
	// ContextWindow of the model in tokens (0: DefaultContextWindow).
	ContextWindow int64
	// MaxAnswerTokens per turn (0: AnswerReserve).
	MaxAnswerTokens int
	Tools           Tools
	Workflow        Workflow
	Finisher        Finisher // nil: no review/merge step
	Limits          Limits
	// Brief is the project's part of the system prompt (its instructions
	// and overview) for the paths the task has touched so far; nil: none.
	// It is rebuilt for every request, so a summary never drops it.
	Brief func(touched []string) string
	// Emit receives every event in order; it must not block for long.
	Emit   func(Event)
	Logger hclog.Logger
	Now    func() time.Time
}

// Agent is one session's loop. Run serves one task at a time.
type Agent struct {
	o   Options
	h   *history
	est *estimator
	seq atomic.Int64
	run sync.Mutex
	// emitMu orders events from parallel tool calls.
	emitMu sync.Mutex
	task   string
	// lastBudget is the most recent budget event (for /budget).
	lastBudget atomic.Pointer[BudgetEvent]
	// touched are the paths tool calls named, in first-seen order (the
	// brief's nested instructions follow them).
	touchedMu sync.Mutex
	touched   []string
	seen      map[string]bool
	// baseMaxCost is the configured cost limit, restored after a task
	// that set its own.
	baseMaxCost float64
	// serverWindow and serverWindowFix: see TaskModel.
	serverWindow    int64
	serverWindowFix string
}

// New returns an agent for one session.
func New(o Options) *Agent {
	if o.Limits.MaxTurns <= 0 {
		o.Limits.MaxTurns = DefaultMaxTurns
	}
	if o.ContextWindow <= 0 {
		o.ContextWindow = DefaultContextWindow
	}
	if o.MaxAnswerTokens <= 0 {
		o.MaxAnswerTokens = AnswerReserve
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Emit == nil {
		o.Emit = func(Event) {}
	}
	return &Agent{o: o, h: &history{}, est: newEstimator(), baseMaxCost: o.Limits.MaxCostUSD}
}

// Pin keeps text in every request's system prompt for the session.
func (a *Agent) Pin(text string) {
	a.run.Lock()
	defer a.run.Unlock()
	a.h.pins = append(a.h.pins, textsafe.Cap(text, 4000))
}

// Budget returns the last budget event (nil before any task).
func (a *Agent) Budget() *BudgetEvent { return a.lastBudget.Load() }

// Summaries reports how many summary requests the session made.
func (a *Agent) Summaries() int {
	a.run.Lock()
	defer a.run.Unlock()
	return a.h.summaries
}

// Emit adds an event of the kernel's own (a recorded turn) to the task's
// one ordered stream, numbered like the agent's.
func (a *Agent) Emit(ev Event) { a.emit(ev) }

func (a *Agent) emit(ev Event) {
	a.emitMu.Lock()
	defer a.emitMu.Unlock()
	ev.Seq = a.seq.Add(1)
	ev.Time = a.o.Now()
	ev.Session = a.o.Session
	a.o.Emit(ev)
}

// task is the state of one Run.
type taskRun struct {
	start     time.Time
	turn      int
	tokens    int64
	cost      float64
	turnCost  float64 // the last turn's
	nudges    int
	lastState string
	lastMode  string
	// firstState and firstMode: where the workflow was once the task
	// started.
	firstState, firstMode string
	changes               map[string]bool
	files                 []string
	fut                   *futility
	lastText              string
	// newChange: the current turn proposed a file change (the same call
	// with the same result is caught by the repeat detector instead).
	newChange bool
	retries   int
	// windowWarned: the server-window notice was given in this task.
	windowWarned bool
}

// Run drives one task to its end and returns the final event (also
// emitted). It never returns without a done event.
func (a *Agent) Run(ctx context.Context, task string) DoneEvent {
	a.run.Lock()
	defer a.run.Unlock()
	t := &taskRun{start: a.o.Now(), changes: map[string]bool{}, fut: newFutility()}
	a.emit(Event{Type: EventTaskStarted, Text: textsafe.Cap(task, 2000)})
	done := a.loop(ctx, t, task)
	if done.Files == nil {
		done.Files = t.files
	}
	done.CostUSD, done.Tokens = t.cost, t.tokens
	a.emit(Event{Type: EventDone, Turn: t.turn, Done: &done})
	return done
}

func (a *Agent) loop(ctx context.Context, t *taskRun, task string) DoneEvent {
	if err := a.o.Workflow.Start(ctx, task); err != nil {
		return a.failed(err)
	}
	st := a.o.Workflow.Status()
	t.lastState, t.lastMode = st.State, st.Mode
	t.firstState, t.firstMode = st.State, st.Mode
	a.h.msgs = append(a.h.msgs, provider.Message{Role: provider.RoleUser, Content: task})
	retriedContext := false
	for {
		if ctx.Err() != nil {
			return a.cancelled(ctx, t)
		}
		if d, stop := a.limitReached(t); stop {
			return d
		}
		t.turn++
		req, err := a.request(ctx, a.o.Workflow.Status())
		if err != nil {
			if ctx.Err() != nil {
				return a.cancelled(ctx, t)
			}
			return a.failed(err)
		}
		a.warnWindow(t, req)
		res, err := a.stream(ctx, t, req)
		if err != nil {
			if ctx.Err() != nil {
				return a.cancelled(ctx, t)
			}
			if (uerr.HasCode(err, provider.CodeContextLength) || uerr.HasPluginCode(err, provider.CodeContextLength)) && !retriedContext {
				retriedContext = true
				t.turn--
				a.emit(Event{Type: EventNotice, Text: "the conversation no longer fits the model's context window; summarizing it"})
				if serr := a.summarize(ctx); serr != nil {
					return a.failed(serr)
				}
				continue
			}
			// A failure the plugin already retried until its budget ran out
			// (RetriesSpent) is not repeated here: the two loops would
			// multiply (2 plugin retries × 3 agent retries = 12 requests).
			// It stays retryable in the error the user sees.
			if ri := provider.RetryOf(err); ri.Retryable && !ri.RetriesSpent && t.retries < 3 {
				t.retries++
				ue := uerr.From(err)
				a.emit(Event{Type: EventError, Turn: t.turn, Error: ue})
				wait := min(max(ri.After, time.Second), 30*time.Second)
				select {
				case <-ctx.Done():
					return a.cancelled(ctx, t)
				case <-time.After(wait):
				}
				t.turn--
				continue
			}
			if ri := provider.RetryOf(err); ri.Retryable && ri.RetriesSpent {
				d := a.failed(err)
				d.Reason += fmt.Sprintf(" (a passing failure: the provider sent the request %d times; try again later)", max(ri.Attempts, 1))
				return d
			} else if ri.Retryable {
				// This loop's own retries ran out (a stream that broke off
				// after text, which the plugin may not repeat): the plugin's
				// advice is for a turn, the person needs to hear it passes.
				d := a.failed(err)
				d.Reason += fmt.Sprintf(" (a passing failure: the turn was tried %d times; try again later)", t.retries+1)
				return d
			}
			return a.failed(err)
		}
		retriedContext, t.retries = false, 0
		a.h.msgs = append(a.h.msgs, res.AssistantMessage())
		if strings.TrimSpace(res.Text) != "" {
			t.lastText = res.Text
		}
		if len(res.ToolCalls) == 0 {
			if d, ok := a.maybeFinish(ctx, t); ok {
				return d
			}
			st := a.o.Workflow.Status()
			if st.State == "idle" || st.State == "" {
				return DoneEvent{Status: StatusDone, Summary: textsafe.Cap(t.lastText, 1000)}
			}
			if a.answered(t, st) {
				return DoneEvent{Status: StatusAnswered, Reason: answeredReason, Summary: textsafe.Cap(t.lastText, 1000)}
			}
			if t.nudges >= maxNudges {
				return DoneEvent{Status: StatusStopped, Reason: fmt.Sprintf("the model stopped working while the workflow is in %s; nothing was merged", st.State), Summary: textsafe.Cap(t.lastText, 1000)}
			}
			t.nudges++
			a.h.msgs = append(a.h.msgs, provider.Message{Role: provider.RoleUser, Content: fmt.Sprintf(
				"Kernel: the task is not finished. The workflow is in state %s (%s mode); writable now: %s. Available tools: %s. Continue with the next step; if you cannot, say precisely why.",
				st.State, st.Mode, st.Writable, strings.Join(st.Available, ", "))})
			a.budget(t, 0)
			continue
		}
		t.newChange = false
		stop := a.runCalls(ctx, t, res.ToolCalls)
		if ctx.Err() != nil {
			return a.cancelled(ctx, t)
		}
		progressed := a.observeState(t) || t.newChange
		if stop == "" {
			stop = t.fut.turn(progressed)
		}
		if stop != "" {
			reason := stop
			if ex := t.fut.explain(); ex != "" {
				reason += "; " + ex
			}
			return DoneEvent{Status: StatusStopped, Reason: reason, Summary: textsafe.Cap(t.lastText, 1000)}
		}
		if d, ok := a.maybeFinish(ctx, t); ok {
			return d
		}
		a.budget(t, 0)
	}
}

// answered reports whether a turn that ended in text, without a tool
// call, is the task's answer: nothing was proposed to change (no file in
// this task's results or the session's changeset) and the workflow is
// where the task found it (no plan submitted). A model that stops with a
// plan or changes still in flight is nudged instead.
func (a *Agent) answered(t *taskRun, st Status) bool {
	return strings.TrimSpace(t.lastText) != "" && len(t.changes) == 0 && st.Changed == 0 &&
		st.State == t.firstState && st.Mode == t.firstMode
}

// maybeFinish asks the Finisher whether the workflow reached review and
// handles its answer.
func (a *Agent) maybeFinish(ctx context.Context, t *taskRun) (DoneEvent, bool) {
	if a.o.Finisher == nil {
		return DoneEvent{}, false
	}
	f, err := a.o.Finisher.Reached(ctx, a.emit)
	a.observeState(t)
	if err != nil {
		if ctx.Err() != nil {
			return a.cancelled(ctx, t), true
		}
		return a.failed(err), true
	}
	if f.Done {
		status := f.Status
		if status == "" {
			status = StatusDone
		}
		sum := f.Summary
		if sum == "" {
			sum = textsafe.Cap(t.lastText, 1000)
		}
		return DoneEvent{Status: status, Summary: sum, Files: f.Files, Commit: f.Commit}, true
	}
	if f.Feedback != "" {
		a.h.msgs = append(a.h.msgs, provider.Message{Role: provider.RoleUser, Content: "Review feedback: " + f.Feedback})
	}
	return DoneEvent{}, false
}

// observeState emits state_changed when the workflow moved; it reports
// whether the task progressed (state change or new file change).
func (a *Agent) observeState(t *taskRun) bool {
	st := a.o.Workflow.Status()
	moved := st.State != t.lastState || st.Mode != t.lastMode
	if moved {
		a.emit(Event{Type: EventStateChanged, Turn: t.turn, State: &StateEvent{From: t.lastState, To: st.State, Mode: st.Mode}})
		t.lastState, t.lastMode = st.State, st.Mode
	}
	return moved
}

func (a *Agent) failed(err error) DoneEvent {
	ue := uerr.From(err)
	a.emit(Event{Type: EventError, Error: ue})
	reason := ue.What
	if ue.Why != "" {
		reason += ": " + ue.Why
	}
	return DoneEvent{Status: StatusFailed, Reason: reason}
}

// cancelled ends a task whose context ended. A context cancelled with a
// structured cause (the kernel stopping a task it cannot go on with, such
// as its database refusing writes on a full disk) fails with that cause;
// any other is the user's cancel.
func (a *Agent) cancelled(ctx context.Context, t *taskRun) DoneEvent {
	if cause := context.Cause(ctx); cause != nil {
		if _, ok := uerr.As(cause); ok {
			d := a.failed(cause)
			d.Summary = textsafe.Cap(t.lastText, 1000)
			return d
		}
	}
	return DoneEvent{Status: StatusCancelled, Reason: "cancelled by the user", Summary: textsafe.Cap(t.lastText, 1000)}
}

// limitReached checks the task's limits before a turn.
func (a *Agent) limitReached(t *taskRun) (DoneEvent, bool) {
	l := a.o.Limits
	elapsed := a.o.Now().Sub(t.start)
	var why string
	switch {
	case t.turn >= l.MaxTurns:
		why = fmt.Sprintf("the task used its %d turns (agent.max_turns)", l.MaxTurns)
	case l.MaxTokens > 0 && t.tokens >= l.MaxTokens:
		why = fmt.Sprintf("the task used %d tokens, its limit is %d (agent.max_tokens)", t.tokens, l.MaxTokens)
	case l.MaxCostUSD > 0 && t.cost >= l.MaxCostUSD:
		why = fmt.Sprintf("the task cost $%.4f, its limit is $%.2f (--max-cost or agent.max_cost_usd); raise the limit to go on", t.cost, l.MaxCostUSD)
	case l.MaxDuration > 0 && elapsed >= l.MaxDuration:
		why = fmt.Sprintf("the task ran %s, its limit is %s (agent.max_duration)", elapsed.Round(time.Second), l.MaxDuration)
	default:
		return DoneEvent{}, false
	}
	return DoneEvent{Status: StatusStopped, Reason: why, Summary: textsafe.Cap(t.lastText, 1000)}, true
}

func (a *Agent) budget(t *taskRun, ctxTokens int64) {
	l := a.o.Limits
	b := &BudgetEvent{Turns: t.turn, MaxTurns: l.MaxTurns, Tokens: t.tokens, MaxTokens: l.MaxTokens,
		CostUSD: t.cost, TurnCostUSD: t.turnCost, CostKnown: l.Cost != nil, MaxCostUSD: l.MaxCostUSD, ElapsedMS: a.o.Now().Sub(t.start).Milliseconds(),
		MaxMS: l.MaxDuration.Milliseconds(), ContextTokens: ctxTokens}
	a.lastBudget.Store(b)
	a.emit(Event{Type: EventBudget, Turn: t.turn, Budget: b})
}

// request builds the next model request, summarizing or sliding the
// history when it no longer fits.
func (a *Agent) request(ctx context.Context, st Status) (provider.ChatRequest, error) {
	tools := a.o.Tools.List()
	specs := make([]provider.ToolSpec, 0, len(tools))
	var toolTokens int64
	for _, tl := range tools {
		specs = append(specs, provider.ToolSpec{Name: tl.Name, Description: tl.Summary, Parameters: tl.Parameters})
		toolTokens += a.est.text(tl.Name + tl.Summary + string(tl.Parameters))
	}
	system := a.systemPrompt(st, tools)
	budget := a.historyBudget(system, toolTokens)
	if float64(a.est.messages(a.h.window())) > SummaryAt*float64(budget) && a.h.cut() > a.h.from {
		if err := a.summarize(ctx); err != nil {
			if ctx.Err() != nil {
				return provider.ChatRequest{}, err
			}
			a.emit(Event{Type: EventNotice, Text: "summarizing the conversation failed; older messages are dropped instead: " + uerr.From(err).What})
		}
	}
	for a.est.messages(a.h.window()) > budget && a.h.dropOldest() {
	}
	return provider.ChatRequest{
		RequestID: fmt.Sprintf("%s-%d", a.o.Session, a.seq.Load()),
		Model:     a.o.ModelName, System: system, Messages: a.h.window(), Tools: specs,
		MaxTokens: a.o.MaxAnswerTokens, CacheSystem: true, CacheTools: true,
	}, nil
}

// historyBudget is what the conversation may use of the context window.
func (a *Agent) historyBudget(system string, toolTokens int64) int64 {
	b := a.o.ContextWindow - int64(a.o.MaxAnswerTokens) - SummaryTokens - a.est.text(system) - toolTokens
	return max(b, 1000)
}

// summarize folds the older messages into the summary with a provider
// request of its own.
func (a *Agent) summarize(ctx context.Context) error {
	cut := a.h.cut()
	if cut <= a.h.from {
		return nil
	}
	req := summaryRequest(a.h.summary, a.h.msgs[a.h.from:cut])
	req.Model = a.o.ModelName
	turn := provider.NewTurn()
	err := a.o.Model.Chat(ctx, req, func(e provider.Event) { _ = turn.Add(e) })
	if err != nil {
		return err
	}
	res := turn.Result()
	if res.Err != nil {
		return res.Err
	}
	if strings.TrimSpace(res.Text) == "" {
		return uerr.New("AGENT_SUMMARY_EMPTY", "the summary request returned no text", "the model answered the summary request with nothing", "retry; if it persists, use a model with a larger context window")
	}
	a.h.summary = textsafe.Cap(res.Text, 4*SummaryTokens) // ~2000 tokens
	a.h.from = cut
	a.h.summaries++
	return nil
}

// stream runs one turn, emitting its events, and assembles it.
func (a *Agent) stream(ctx context.Context, t *taskRun, req provider.ChatRequest) (provider.Result, error) {
	estimated := a.est.messages(req.Messages) + a.est.text(req.System)
	turn := provider.NewTurn()
	var protoErr error
	err := a.o.Model.Chat(ctx, req, func(e provider.Event) {
		if protoErr != nil {
			return
		}
		if err := turn.Add(e); err != nil {
			protoErr = err
			return
		}
		switch {
		case e.TextDelta != "":
			a.emit(Event{Type: EventTextDelta, Turn: t.turn, Text: e.TextDelta})
		case e.ReasoningDelta != "":
			a.emit(Event{Type: EventReasoningDelta, Turn: t.turn, Text: e.ReasoningDelta})
		case e.ToolCallStart != nil:
			a.emit(Event{Type: EventToolCallStart, Turn: t.turn, Tool: &ToolEvent{CallID: e.ToolCallStart.CallID, Name: e.ToolCallStart.Name}})
		case e.Usage != nil:
			u := *e.Usage
			a.emit(Event{Type: EventUsage, Turn: t.turn, Usage: &u})
		}
	})
	if protoErr != nil {
		return provider.Result{}, uerr.Wrap(protoErr, "PROVIDER_PROTOCOL", "the provider plugin broke the event protocol", protoErr.Error(), "report it to the plugin's author; try another provider")
	}
	if err != nil {
		return provider.Result{}, err
	}
	if err := turn.End(); err != nil {
		return provider.Result{}, uerr.Wrap(err, provider.CodeStreamIncomplete, "the model's turn ended early", err.Error(), "retry the task")
	}
	res := turn.Result()
	if res.Err != nil {
		return provider.Result{}, res.Err
	}
	u := res.Usage
	t.tokens += u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
	l := a.o.Limits
	t.turnCost = 0
	if l.Cost != nil {
		t.turnCost = l.Cost(u)
		t.cost += t.turnCost
	}
	a.est.calibrate(estimated, u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens)
	return res, nil
}

// call is one tool call of a turn on its way through runCalls.
type call struct {
	end  provider.ToolCallEnd
	acc  Access
	deps []int
	done chan struct{}
	res  ToolResult
	note string
	stop string
}

func overlaps(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y || strings.HasPrefix(y, strings.TrimSuffix(x, "/")+"/") || strings.HasPrefix(x, strings.TrimSuffix(y, "/")+"/") || x == "" || y == "" {
				return true
			}
		}
	}
	return false
}

func conflict(a, b Access) bool {
	return a.Exclusive || b.Exclusive || overlaps(a.Writes, b.Writes) || overlaps(a.Writes, b.Reads) || overlaps(a.Reads, b.Writes)
}

// runCalls executes a turn's calls: concurrently, except that a call waits
// for every earlier call it conflicts with (a write and a read or write of
// the same path, or a kernel tool). Results go back in call order.
func (a *Agent) runCalls(ctx context.Context, t *taskRun, ends []provider.ToolCallEnd) string {
	calls := make([]*call, len(ends))
	for i, e := range ends {
		c := &call{end: e, done: make(chan struct{})}
		args := e.Arguments
		if e.Invalid != nil && e.RawArguments != "" {
			// Arguments the model wrapped in a JSON string or a markdown
			// fence go to the router as sent: it unwraps and audits them.
			if obj, _, ok := toolcall.UnwrapArgs([]byte(e.RawArguments)); ok {
				c.end.Invalid, c.end.Arguments, args = nil, json.RawMessage(e.RawArguments), obj
			}
		}
		if c.end.Invalid == nil {
			c.acc = a.o.Tools.Access(e.Name, args)
		}
		for j := range i {
			if c.end.Invalid == nil && calls[j].end.Invalid == nil && conflict(calls[j].acc, c.acc) {
				c.deps = append(c.deps, j)
			}
		}
		calls[i] = c
	}
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(c.done)
			for _, d := range c.deps {
				select {
				case <-calls[d].done:
				case <-ctx.Done():
					return
				}
			}
			a.exec(ctx, t, c)
		}()
	}
	wg.Wait()
	stop := ""
	for _, c := range calls {
		a.h.msgs = append(a.h.msgs, a.resultMessage(c))
		if c.stop != "" && stop == "" {
			stop = c.stop
		}
	}
	return stop
}

// exec runs one call (reads are retried once after 100 ms; writes never).
func (a *Agent) exec(ctx context.Context, t *taskRun, c *call) {
	e := c.end
	if e.Invalid != nil {
		c.res = ToolResult{Err: e.Invalid}
		a.emit(Event{Type: EventToolResult, Turn: t.turn, Tool: &ToolEvent{CallID: e.CallID, Name: e.Name, Error: e.Invalid, Summary: "not executed"}})
		return
	}
	start := a.o.Now()
	a.emit(Event{Type: EventToolExecuting, Turn: t.turn, Tool: &ToolEvent{CallID: e.CallID, Name: e.Name, Args: boundedArgs(e.Arguments)}})
	res := a.o.Tools.Call(ctx, e.CallID, e.Name, e.Arguments)
	if !res.OK && res.Retryable && len(c.acc.Writes) == 0 && !c.acc.Exclusive && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
			res = a.o.Tools.Call(ctx, e.CallID+"-retry", e.Name, e.Arguments)
		}
	}
	res.Duration = a.o.Now().Sub(start)
	c.res = res
	a.emitMu.Lock()
	c.note, c.stop = t.fut.observe(e.Name, e.Arguments, res)
	for _, f := range res.Changes {
		t.newChange = true
		if !t.changes[f] {
			t.changes[f] = true
			t.files = append(t.files, f)
		}
	}
	a.emitMu.Unlock()
	a.touch(res.Target)
	for _, f := range res.Changes {
		a.touch(f)
	}
	a.emit(Event{Type: EventToolResult, Turn: t.turn, Tool: &ToolEvent{CallID: e.CallID, Name: e.Name, Target: res.Target, Plugin: res.Plugin,
		DurationMS: res.Duration.Milliseconds(), OK: res.OK, Error: res.Err, Summary: res.Summary, Changes: res.Changes, TestStatus: res.TestStatus}})
}

// touch remembers a project path a call named (at most 64: the brief
// reads one instructions file per directory on their way).
func (a *Agent) touch(p string) {
	if p == "" || strings.ContainsAny(p, "\n\x00") || len(p) > 512 {
		return
	}
	a.touchedMu.Lock()
	defer a.touchedMu.Unlock()
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	if a.seen[p] || len(a.touched) >= 64 {
		return
	}
	a.seen[p] = true
	a.touched = append(a.touched, p)
}

// Touched are the paths the session's calls named so far.
func (a *Agent) Touched() []string {
	a.touchedMu.Lock()
	defer a.touchedMu.Unlock()
	return append([]string(nil), a.touched...)
}

func boundedArgs(b json.RawMessage) json.RawMessage {
	if len(b) > 4096 || !json.Valid(b) {
		s, _ := json.Marshal(fmt.Sprintf("(%d bytes of arguments)", len(b)))
		return s
	}
	return b
}

// resultMessage is what the model reads about a call.
func (a *Agent) resultMessage(c *call) provider.Message {
	if c.end.Invalid != nil {
		return provider.InvalidCallResult(c.end)
	}
	r := c.res
	var content string
	if r.OK {
		content = string(r.Output)
		if content == "" {
			content = `{"ok":true}`
		}
	} else {
		e := r.Err
		if e == nil {
			e = uerr.New("TOOL_FAILED", "the call failed", "", "")
		}
		if errors.Is(e, context.Canceled) {
			e = uerr.New("CANCELLED", "the call was cancelled", "the user cancelled the task", "")
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": e.FullCode(), "what": e.What, "why": e.Why, "fix": e.Fix}, "retryable": r.Retryable})
		content = string(b)
	}
	if c.note != "" {
		content += "\n" + c.note
	}
	return provider.Message{Role: provider.RoleTool, ToolCallID: c.end.CallID, Content: content, IsError: !r.OK}
}

// systemPrompt tells the model where the workflow stands, what it may
// write and which tools exist (one line each, within ToolPromptBudget).
func (a *Agent) systemPrompt(st Status, tools []Tool) string {
	var b strings.Builder
	b.WriteString("You are fluffy, a careful programming assistant working on the user's project through tools. ")
	b.WriteString("Every write goes to a sandboxed changeset that is reviewed before it reaches the project.\n\n")
	fmt.Fprintf(&b, "Workflow: %s mode, state %s. Writable now: %s.\n", st.Mode, st.State, st.Writable)
	if st.Mode == "strict" {
		b.WriteString("Strict mode is test-first and enforced by the kernel: finish planning with plan.complete, write a failing test, run it with test.run (it must fail: red), then change the source until test.run is green. The kernel then reviews, merges and commits.\n")
	}
	if len(st.Available) > 0 {
		fmt.Fprintf(&b, "Tools available in this state: %s.\n", strings.Join(st.Available, ", "))
	}
	if a.o.Brief != nil {
		if brief := a.o.Brief(a.Touched()); brief != "" {
			b.WriteString("\n")
			b.WriteString(brief)
		}
	}
	b.WriteString("\nTools (arguments are described by their schemas):\n")
	var used int64
	for i, tl := range tools {
		line := fmt.Sprintf("- %s: %s\n", tl.Name, textsafe.Cap(tl.Summary, 160))
		n := a.est.text(line)
		if used+n > ToolPromptBudget {
			fmt.Fprintf(&b, "- … and %d more tools (see the function definitions)\n", len(tools)-i)
			break
		}
		used += n
		b.WriteString(line)
	}
	if len(a.h.pins) > 0 {
		b.WriteString("\nPinned by the user (keep these in mind for the whole session):\n")
		for _, p := range a.h.pins {
			fmt.Fprintf(&b, "- %s\n", p)
		}
	}
	b.WriteString("\nWhen a tool refuses a call, read its error: it says why and what to do instead. Do not repeat a call that already returned the same result. ")
	b.WriteString("If a write is refused by the workflow, check the state above: in strict mode write or run a failing test first (test.run must be red before source can change); if the policy refuses a path, choose a path it allows or explain to the user what you need. ")
	b.WriteString("When the user only asks a question, answer it in text without proposing changes.")
	return b.String()
}

// Conversation is what the agent carries from one task to the next: the
// messages since the last summary, that summary and the pins. The kernel
// keeps it with the session, so a resumed session (or a restarted kernel)
// continues the same conversation.
type Conversation struct {
	Messages []provider.Message `json:"messages,omitempty"`
	Summary  string             `json:"summary,omitempty"`
	Pins     []string           `json:"pins,omitempty"`
}

// Conversation returns a copy of the session's conversation (it waits for
// a running task's turn to end).
func (a *Agent) Conversation() Conversation {
	a.run.Lock()
	defer a.run.Unlock()
	return Conversation{Messages: slices.Clone(a.h.msgs[a.h.from:]), Summary: a.h.summary, Pins: slices.Clone(a.h.pins)}
}

// Restore replaces the conversation with c (a resumed session's); the
// next task continues it.
func (a *Agent) Restore(c Conversation) {
	a.run.Lock()
	defer a.run.Unlock()
	a.h.msgs, a.h.from, a.h.summary, a.h.pins = slices.Clone(c.Messages), 0, c.Summary, slices.Clone(c.Pins)
}
