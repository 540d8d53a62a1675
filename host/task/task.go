package task

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/fluffy-waffle/fluffy/host/modelprofile"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/merge"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/state"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/pin"
)

// Codes of the task runner's errors.
const (
	CodeTaskRunning  = "TASK_RUNNING"
	CodeNoTask       = "TASK_NOT_RUNNING"
	CodeNoProvider   = "TASK_NO_PROVIDER"
	CodeReviewNeeded = "REVIEW_NEEDED"
	CodeNoReview     = "REVIEW_NOT_PENDING"
)

// maxTaskEvents bounds the events kept for `fluffy attach` (the oldest are
// dropped; an attach asking for them gets what is left).
const maxTaskEvents = 20000

// Options configure the kernel's task runner.
type Options struct {
	// Provider is the provider plugin's name (provider-replay,
	// provider-openai, ...); Model the model it is asked for.
	Provider string
	Model    string
	Limits   agent.Limits
	// ContextWindow of the model in tokens (0: the agent's default).
	ContextWindow int64
	// AutoMaxLines is the merge auto-approval threshold (0: 500).
	AutoMaxLines int
	Logger       hclog.Logger
	// Profiles are the models fluffy knows (nil: the builtin table);
	// ProfileOverride is the user's model_profile.* settings.
	Profiles        *modelprofile.Table
	ProfileOverride modelprofile.Override
}

// Request is one task as the CLI asks for it.
type Request struct {
	Prompt string
	// Interactive means a person can answer reviews (review.respond).
	// Yes lets a task without one merge a change that meets the
	// auto-merge criteria (tests pass, nothing the policy sends to
	// review, at most merge.auto_max_lines); it never approves a review
	// the policy or the criteria ask a person for. Without either, the
	// task stops before merging.
	Yes, Interactive bool
	// Mode, when set, is requested for the session before the task starts
	// (through the policy, like session.set_mode).
	Mode string
	// Provider (a provider plugin's name) and Model override the
	// configured ones for this task (--provider, --model).
	Provider, Model string
	// ProviderConfig, when not nil, is the Configure JSON Provider runs
	// with for this task (base URL, model, API key), as the CLI resolved
	// it from its own configuration and environment: the key is the
	// CLI's, not the kernel's. It is secret: never logged or audited.
	ProviderConfig []byte
	// Record turns every provider turn of the task into a cassette line,
	// sent as a recorded_turn event (`fluffy --record FILE`).
	Record bool
	// MaxCostUSD, when > 0, is this task's cost limit (--max-cost).
	MaxCostUSD float64
	// ProviderName is the provider as the user named it (openai, ollama…),
	// where Provider is its plugin.
	ProviderName string
}

// Tasks runs the AI loop of the kernel's session: one task at a time,
// every event kept for attach, reviews answered through Respond.
type Tasks struct {
	k   *Deps
	o   Options
	mg  *state.Manager
	m   *state.Machine
	ag  *agent.Agent
	log hclog.Logger
	hv  *viewHasher
	// merger plans and applies the changeset's merge.
	merger *merge.Merger

	mu          sync.Mutex
	running     bool
	cancel      context.CancelFunc
	task        string
	yes         bool
	interactive bool
	provider    string    // this task's provider plugin
	model       string    // this task's model ("" = the provider's default)
	rec         *recorder // this task's recording (--record), nil when off
	dirty       *bool     // whether the project's tree had uncommitted changes when the task started (nil: unknown)
	events      []agent.Event
	subs        map[chan agent.Event]struct{}
	reviews     map[string]pendingReview
	// approved are the tool reviews a person approved for the session
	// (scope "session"), by tool and rule.
	approved map[string]bool
	// am turns a review's "always" into a reviewed policy.update.
	am *amender
}

// pendingReview is a review waiting for Respond, with the scopes offered.
type pendingReview struct {
	ch     chan router.Approval
	kind   string
	scopes []string
}

// Open wires the workflow machine, the agent and the kernel tools for
// the kernel's session.
func Open(ctx context.Context, k *Deps, o Options) (*Tasks, error) {
	if o.Logger == nil {
		o.Logger = k.Logger
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	// No provider here is not an error: each task may name its own
	// (Request.Provider), and Run says so when neither does.
	k.Providers.SetProvider(o.Provider)
	t := &Tasks{k: k, o: o, log: o.Logger.Named("task"), subs: map[chan agent.Event]struct{}{},
		reviews: map[string]pendingReview{}, approved: map[string]bool{}}
	t.am = &amender{engine: k.Policy, path: policy.ProjectPath(k.Workspace), pins: pin.NewStore(k.Home), project: k.Workspace, audit: k.Auditor}
	t.hv = newViewHasher(k)
	mg, err := state.NewManager(state.Options{
		DB: k.ProjectDB, Audit: k.Audit, Policy: k.Policy, Approver: modeApprover{t},
		Project: k.Workspace, Logger: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	m, err := mg.Open(ctx, state.SessionConfig{ID: k.Session.ID(), ChangesetRef: k.Session.ID(), View: stateView{t}})
	if err != nil {
		return nil, err
	}
	t.mg, t.m = mg, m
	if t.merger, err = merge.New(merge.Options{DB: k.ProjectDB, Audit: k.Audit, Sensitive: t.sensitive, AutoMaxLines: o.AutoMaxLines, Logger: o.Logger}); err != nil {
		return nil, err
	}
	// A merge a killed kernel left half done is finished first (seed
	// 000's recovery): the merge log says which files still need writing.
	if ops, err := t.merger.Resume(ctx); err != nil {
		t.log.Error("an interrupted merge could not be finished", "error", err)
	} else {
		for _, op := range ops {
			t.log.Warn("finished an interrupted merge", "operation", op.ID, "landed", op.Landed(), "conflicts", op.Conflicts(), "failed", op.Failed())
		}
	}
	t.finishInterruptedCommit(ctx)
	k.GateState(m.State)
	for _, kt := range mg.KernelTools() {
		mt, err := kernelManifestTool(kt.Def)
		if err != nil {
			return nil, err
		}
		k.KernelTools.Add(kt.Def.Name, mt, kt.Handle)
	}
	t.ag = agent.New(agent.Options{
		Session: k.Session.ID(), Model: providerModel{t: t}, ModelName: o.Model,
		ContextWindow: o.ContextWindow, Tools: &taskTools{t: t}, Workflow: workflow{t},
		Finisher: &finisher{t: t}, Limits: o.Limits, Emit: t.publish, Logger: o.Logger, Brief: t.brief,
	})
	return t, nil
}

// Machine is the session's workflow machine.
func (t *Tasks) Machine() *state.Machine { return t.m }

// Agent is the session's loop (pins, budget).
func (t *Tasks) Agent() *agent.Agent { return t.ag }

// Running reports whether a task runs now.
func (t *Tasks) Running() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

// Run runs one task to its end; every event goes to emit (in order) and to
// attached clients. The result is the task's done event.
func (t *Tasks) Run(ctx context.Context, req Request, emit func(agent.Event)) (agent.DoneEvent, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return agent.DoneEvent{}, uerr.New("TASK_EMPTY", "the task is empty", "fluffy needs a sentence saying what to change", `run e.g. fluffy "add error handling to parseConfig"`)
	}
	if err := t.k.ProjectDB.FullErr(); err != nil {
		return agent.DoneEvent{}, err
	}
	ctx, stop := context.WithCancelCause(ctx)
	cancel := func() { stop(nil) }
	defer cancel()
	// A project database that stops writing on a full disk ends the task
	// with its DISK_FULL error: nothing the task does from then on could
	// be recorded (audit, workflow state, changeset).
	go func() {
		select {
		case <-t.k.ProjectDB.Full():
			stop(t.k.ProjectDB.FullErr())
		case <-ctx.Done():
		}
	}()
	t.mu.Lock()
	if t.running {
		t.mu.Unlock()
		return agent.DoneEvent{}, uerr.New(CodeTaskRunning, "a task is already running in this session",
			"one session runs one task at a time", "wait for it, follow it with `fluffy attach`, or cancel it (Ctrl-C in its terminal, or /cancel)")
	}
	provider, model := t.o.Provider, t.o.Model
	if req.Provider != "" && req.Provider != t.o.Provider {
		provider, model = req.Provider, ""
	}
	if req.Model != "" {
		model = req.Model
	}
	if provider == "" {
		t.mu.Unlock()
		return agent.DoneEvent{}, uerr.New(CodeNoProvider, "no AI provider is configured", "a task needs a provider plugin to talk to a model",
			"name one: `fluffy init` (asks), `fluffy --provider openai|anthropic|ollama|replay \"...\"`, or `fluffy config set provider NAME`")
	}
	// Switched while no task runs: the previous task's provider calls
	// are over, so its instance can be replaced.
	if err := t.k.Providers.UseProvider(provider, req.ProviderConfig); err != nil {
		t.mu.Unlock()
		return agent.DoneEvent{}, err
	}
	t.provider, t.model = provider, model
	t.running, t.cancel, t.task = true, cancel, req.Prompt
	t.yes, t.interactive = req.Yes, req.Interactive
	t.rec = nil
	if req.Record {
		t.rec = newRecorder(t.k.Providers.Secrets())
	}
	t.events = t.events[:0]
	ch := make(chan agent.Event, 4096)
	t.subs[ch] = struct{}{}
	t.mu.Unlock()
	dirty := t.treeDirty(ctx)
	t.mu.Lock()
	t.dirty = dirty
	t.mu.Unlock()
	tm, notice := t.taskModel(provider, req.ProviderName, model, req.ProviderConfig, req.MaxCostUSD)
	t.ag.SetModel(tm)
	if notice != "" {
		t.publish(agent.Event{Type: agent.EventNotice, Text: notice})
	}

	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for ev := range ch {
			emit(ev)
		}
	}()
	done := t.run(ctx, req)

	t.mu.Lock()
	t.running, t.cancel = false, nil
	delete(t.subs, ch)
	close(ch)
	t.mu.Unlock()
	<-forwarded
	return done, nil
}

func (t *Tasks) run(ctx context.Context, req Request) agent.DoneEvent {
	if req.Mode != "" && req.Mode != string(t.m.Position().Mode) {
		if _, err := t.m.SetMode(ctx, state.ModeRequest{Mode: state.Mode(req.Mode), Caller: policy.Caller{Kind: "user"}, Reason: "requested with --mode"}); err != nil {
			ue := uerr.From(err)
			t.publish(agent.Event{Type: agent.EventError, Error: ue})
			d := agent.DoneEvent{Status: agent.StatusFailed, Reason: ue.What}
			t.publish(agent.Event{Type: agent.EventDone, Done: &d})
			return d
		}
	}
	before := t.m.Position().State
	done := t.ag.Run(ctx, req.Prompt)
	// An answered question changed nothing: the session goes back to idle
	// so the next task starts afresh instead of mid-plan.
	if done.Status == agent.StatusAnswered && before == state.Idle && t.m.Position().State == state.Planning {
		if _, err := t.m.Cancel(ctx, "the task was answered; nothing changed"); err != nil {
			t.log.Warn("the answered task's session did not return to idle", "error", err)
		}
	}
	return done
}

// Cancel stops the running task: the provider stream and the running
// calls end with the context.
func (t *Tasks) Cancel() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.running {
		return uerr.New(CodeNoTask, "no task is running", "there is nothing to cancel", "start one with fluffy \"...\"")
	}
	t.cancel()
	return nil
}

// publish numbers nothing (the agent does) and fans the event out.
func (t *Tasks) publish(ev agent.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.events) >= maxTaskEvents {
		t.events = append(t.events[:0], t.events[len(t.events)-maxTaskEvents/2:]...)
	}
	t.events = append(t.events, ev)
	for ch := range t.subs {
		select {
		case ch <- ev:
		default:
			// A client that does not read loses the stream (it can
			// attach again from its last seq); the task never waits.
			delete(t.subs, ch)
			close(ch)
		}
	}
}

// Attach replays the events of the running (or last) task after afterSeq
// and follows it live until it ends or ctx does.
func (t *Tasks) Attach(ctx context.Context, afterSeq int64, emit func(agent.Event)) error {
	t.mu.Lock()
	var past []agent.Event
	for _, ev := range t.events {
		if ev.Seq > afterSeq {
			past = append(past, ev)
		}
	}
	var ch chan agent.Event
	if t.running {
		ch = make(chan agent.Event, 4096)
		t.subs[ch] = struct{}{}
	}
	t.mu.Unlock()
	last := afterSeq
	for _, ev := range past {
		emit(ev)
		last = ev.Seq
	}
	if ch == nil {
		if len(past) == 0 && len(t.events) == 0 {
			return uerr.New(CodeNoTask, "this session has not run a task yet", "there is nothing to show", `start one with fluffy "..."`)
		}
		return nil
	}
	defer func() {
		t.mu.Lock()
		if _, ok := t.subs[ch]; ok {
			delete(t.subs, ch)
			close(ch)
		}
		t.mu.Unlock()
	}()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return nil
			}
			if ev.Seq > last {
				emit(ev)
			}
			if ev.Type == agent.EventDone {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// review asks the person at the terminal; it blocks until Respond or ctx.
func (t *Tasks) review(ctx context.Context, ev agent.ReviewEvent) (router.Approval, error) {
	t.mu.Lock()
	interactive := t.interactive
	if !interactive {
		t.mu.Unlock()
		return router.Approval{}, uerr.New(CodeReviewNeeded, ev.Summary+" needs a person's review",
			"the task runs without a terminal to ask (--yes approves only what the policy lets pass without review)",
			"run the task in the REPL (`fluffy`) or in a terminal, or follow it with `fluffy attach` and answer there")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	ev.ID = "r-" + hex.EncodeToString(b[:])
	ch := make(chan router.Approval, 1)
	t.reviews[ev.ID] = pendingReview{ch: ch, kind: ev.Kind, scopes: ev.Scopes}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.reviews, ev.ID)
		t.mu.Unlock()
	}()
	t.publish(agent.Event{Type: agent.EventReviewRequested, Review: &ev})
	select {
	case a := <-ch:
		res := ev
		res.Decision, res.Reason = "rejected", a.Note
		if a.Approved {
			res.Decision = "approved"
		}
		t.publish(agent.Event{Type: agent.EventReviewResolved, Review: &res})
		return a, nil
	case <-ctx.Done():
		return router.Approval{}, ctx.Err()
	}
}

// Respond answers a pending review. An approval's scope must be one the
// review offered ("" is once).
func (t *Tasks) Respond(id string, a router.Approval) error {
	t.mu.Lock()
	pr, ok := t.reviews[id]
	if ok && a.Approved && a.Scope != "" && a.Scope != router.ScopeOnce && !slices.Contains(pr.scopes, a.Scope) {
		t.mu.Unlock()
		why := fmt.Sprintf("this %s review offers %s", pr.kind, strings.Join(pr.scopes, ", "))
		if len(pr.scopes) == 0 {
			why = fmt.Sprintf("a %s review is answered once", pr.kind)
		}
		fix := "approve without a scope, or with one the review offers"
		if a.Scope == router.ScopeAlways {
			why += "; \"always\" is offered when a rule of the policy file asked for the review of a file path, and the policy can be amended to allow exactly that"
		}
		return uerr.New(CodeScopeUnsupported, fmt.Sprintf("%q is not offered for this review", textsafe.Line(a.Scope, 40)), why, fix)
	}
	if ok {
		delete(t.reviews, id)
	}
	t.mu.Unlock()
	if !ok {
		return uerr.New(CodeNoReview, fmt.Sprintf("no review %q is waiting", textsafe.Line(id, 64)), "it was answered already, timed out, or its task ended", "answer the review shown last")
	}
	pr.ch <- a
	return nil
}

// Pending returns the ids of the reviews waiting for an answer.
func (t *Tasks) Pending() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id := range t.reviews {
		ids = append(ids, id)
	}
	return ids
}

// Close cancels a running task.
func (t *Tasks) Close() {
	t.mu.Lock()
	if t.cancel != nil {
		t.cancel()
	}
	t.mu.Unlock()
	if t.mg != nil {
		t.mg.Close(t.k.Session.ID())
	}
}

// current is the running task's provider plugin and model.
func (t *Tasks) current() (string, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.provider == "" {
		return t.o.Provider, t.o.Model
	}
	return t.provider, t.model
}
