package state

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/looplab/fsm"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
	"github.com/fluffy-waffle/fluffy/policy"
)

// Codes of refused transitions.
const (
	// CodeTransitionRefused: the table has no such transition from here.
	CodeTransitionRefused = "STATE_TRANSITION_REFUSED"
	// CodeGuardFailed: the table has it, but its guard did not hold.
	CodeGuardFailed = "STATE_GUARD_FAILED"
	// CodeBadRun: a test run the kernel did not stamp with its view.
	CodeBadRun = "STATE_BAD_TEST_RUN"
	// CodeSessionOpen: the session is already open in this kernel.
	CodeSessionOpen = "STATE_SESSION_OPEN"
)

// The on_fail messages, and fluffy's for the guards without one.
const (
	OnFailRed      = "Tests must exist, have been run, and at least one must fail (TDD Red phase)"
	OnFailGreen    = "All tests must pass before review"
	OnFailApproved = "Merge must be approved before committing"
	OnFailChanges  = "Code changes must exist before validating"
	OnFailFailing  = "A test run on the current tree that does not pass is needed to go back to writing"
	OnFailExempt   = "An exemption must be granted through workflow.request_exemption"
	OnFailBudget   = "The tech-debt budget does not allow this explore commit"
	OnFailStale    = "Only a test run computed on the current tree counts"
)

// Auditor records audit events; host/audit's *Log implements it.
type Auditor interface {
	Append(ctx context.Context, ev audit.Event) (audit.Record, error)
}

// PolicyEvaluator judges session.set_mode; policy's *Engine implements it.
type PolicyEvaluator interface {
	Evaluate(ctx context.Context, req policy.Request) policy.Result
}

// ReviewRequest is what the machine asks a human to approve.
type ReviewRequest struct {
	SessionID string
	// Kind is "session_mode" (the only review the machine asks for itself).
	Kind string
	What string
	Why  string
}

// Approver asks a human (the REPL's /approve and /reject). The router or
// the CLI provides it; without one every review is refused.
type Approver interface {
	Approve(ctx context.Context, r ReviewRequest) (bool, error)
}

// View is the session's workspace as the machine needs it; host/workspace
// provides it (the router may adapt).
type View interface {
	// ViewHash identifies the exact tree tools see now.
	ViewHash() string
	// ChangedPaths lists the project-relative paths the session's
	// changeset adds, changes or deletes.
	ChangedPaths() []string
}

// Options configure a Manager.
type Options struct {
	// DB is the project database (host/store); required.
	DB *store.DB
	// Audit records every transition durably; required.
	Audit Auditor
	// Rules (test paths, exemptions, debt); nil means DefaultRules.
	Rules *Rules
	// Policy judges session.set_mode; nil refuses every mode but strict.
	Policy PolicyEvaluator
	// Approver reviews debug mode; nil refuses every review.
	Approver Approver
	// Project is the project root (for the coverage baseline); required.
	Project string
	// Catalog lists the tools the router can dispatch, for the
	// available_tools of a refusal; nil lists fluffy's builtin tools.
	Catalog func() []ToolInfo
	Logger  hclog.Logger
	Now     func() time.Time
}

// Manager owns the workflow machines of one project's sessions.
type Manager struct {
	o      Options
	db     *store.DB
	rules  *Rules
	budget *Budget
	log    hclog.Logger

	mu   sync.Mutex
	open map[string]*Machine
}

// NewManager checks o and returns a manager.
func NewManager(o Options) (*Manager, error) {
	if o.DB == nil || o.Audit == nil || o.Project == "" {
		return nil, uerr.New(CodeStore, "the workflow machine needs the project database, the audit log and the project directory",
			"state.Options.DB, Audit or Project is missing", "pass them from the kernel")
	}
	if o.Rules == nil {
		o.Rules = DefaultRules()
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Manager{o: o, db: o.DB, rules: o.Rules, budget: NewBudget(o.Project, o.Rules.Debt(), o.Now),
		log: o.Logger.Named("state"), open: map[string]*Machine{}}, nil
}

// Rules returns the manager's rules.
func (mg *Manager) Rules() *Rules { return mg.rules }

// Budget returns the project's tech-debt budget.
func (mg *Manager) Budget() *Budget { return mg.budget }

// SessionConfig opens one session's machine.
type SessionConfig struct {
	ID string
	// ChangesetRef names the session's changeset (host/workspace). Stored
	// with a new session; a resumed session keeps the stored one, and a
	// different non-empty value is an error.
	ChangesetRef string
	// View is the session's workspace view; required.
	View View
}

// Saved returns the persisted snapshot of session id without opening it
// (the kernel reads the changeset reference before building the view).
func (mg *Manager) Saved(id string) (Snapshot, bool, error) {
	if err := checkSessionID(id); err != nil {
		return Snapshot{}, false, err
	}
	c, err := loadChain(mg.db, id)
	if err != nil || c.last == nil {
		return Snapshot{}, false, err
	}
	return c.last.Snapshot, true, nil
}

// Latest returns the snapshot of the session written last (crash
// recovery restores the most recent session state).
func (mg *Manager) Latest() (Snapshot, bool, error) {
	id, ok, err := readLatest(mg.db)
	if err != nil || !ok {
		return Snapshot{}, false, err
	}
	return mg.Saved(id)
}

// Machine returns the open machine of session id.
func (mg *Manager) Machine(id string) (*Machine, bool) {
	mg.mu.Lock()
	defer mg.mu.Unlock()
	m, ok := mg.open[id]
	return m, ok
}

// Open opens a session's machine: a new one starts idle in strict mode; a
// persisted one resumes where it was, after its state chain verified. A
// broken chain resumes idle in strict mode with a durable record of the
// break (state that cannot be trusted grants nothing). A different mode is
// then requested with SetMode, which goes through the policy.
func (mg *Manager) Open(ctx context.Context, sc SessionConfig) (*Machine, error) {
	if err := checkSessionID(sc.ID); err != nil {
		return nil, err
	}
	if sc.View == nil {
		return nil, uerr.New(CodeBadSession, "session "+sc.ID+" has no workspace view", "the machine judges test runs against the session's current tree", "pass the session's view")
	}
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if _, ok := mg.open[sc.ID]; ok {
		return nil, uerr.New(CodeSessionOpen, "session "+sc.ID+" is already open", "one kernel drives a session through one machine", "use Manager.Machine")
	}
	c, err := loadChain(mg.db, sc.ID)
	if err != nil {
		return nil, err
	}
	m := newMachine(mg, sc.ID, sc.View)
	switch {
	case c.last == nil && c.broken == "":
		snap := Snapshot{Session: sc.ID, State: Idle, Mode: Strict, ChangesetRef: sc.ChangesetRef}
		rec := record{Kind: kindOpen, Snapshot: snap, Actor: "kernel", Segment: true, Note: "new session"}
		if err := m.append(ctx, &rec, m.auditTransition(&rec, nil)); err != nil {
			return nil, err
		}
		m.setSnap(snap)
	case c.broken != "":
		snap := Snapshot{Session: sc.ID, State: Idle, Mode: Strict, ChangesetRef: sc.ChangesetRef}
		if c.last != nil {
			m.seq, m.lastHash = c.last.Seq, c.lastHash
			if snap.ChangesetRef == "" {
				snap.ChangesetRef = c.last.Snapshot.ChangesetRef
			}
		}
		note := "state chain broken: " + c.broken + "; the session restarts idle in strict mode"
		mg.log.Error("workflow state chain broken", "session", sc.ID, "reason", c.broken)
		rec := record{Kind: kindBreak, Snapshot: snap, Actor: "kernel", Segment: true, Note: note}
		ev := m.auditTransition(&rec, nil)
		ev.DenyReason = note
		if err := m.append(ctx, &rec, ev); err != nil {
			return nil, err
		}
		m.setSnap(snap)
	default:
		snap := c.last.Snapshot
		if sc.ChangesetRef != "" && snap.ChangesetRef != "" && sc.ChangesetRef != snap.ChangesetRef {
			return nil, uerr.New(CodeBadSession, "session "+sc.ID+" belongs to another changeset",
				fmt.Sprintf("it was stored with changeset %q, the kernel passed %q", snap.ChangesetRef, sc.ChangesetRef), "open the session with its own changeset (Manager.Saved tells which)")
		}
		m.seq, m.lastHash = c.last.Seq, c.lastHash
		m.setSnap(snap)
		_, err := mg.o.Audit.Append(ctx, audit.Event{Type: audit.EventStateTransition, SessionID: sc.ID, SessionMode: string(snap.Mode), State: string(snap.State),
			Caller: "kernel", Metadata: map[string]string{"event": "resume", "from": string(snap.State), "to": string(snap.State), "state_seq": strconv.FormatUint(m.seq, 10)}})
		if err != nil {
			return nil, err
		}
	}
	mg.open[sc.ID] = m
	return m, nil
}

// Close forgets the session's machine (its state stays persisted).
func (mg *Manager) Close(id string) {
	mg.mu.Lock()
	delete(mg.open, id)
	mg.mu.Unlock()
}

// Machine is one session's workflow machine. Its driving methods are
// serialized; Allowed and Status never wait for them.
type Machine struct {
	mg   *Manager
	id   string
	view View

	mu       sync.Mutex
	snap     Snapshot
	seq      uint64
	lastHash [hashLen]byte
	lastRun  *testrun.Run // newest recorded run (memory only)
	lastAt   time.Time
	fsms     map[Flow]*fsm.FSM

	pos     atomic.Pointer[Position]
	status  atomic.Pointer[Snapshot]
	runInfo atomic.Pointer[RunFacts]
}

func newMachine(mg *Manager, id string, v View) *Machine {
	m := &Machine{mg: mg, id: id, view: v, fsms: map[Flow]*fsm.FSM{}}
	cbs := fsm.Callbacks{
		"before_event": func(ctx context.Context, e *fsm.Event) {
			t := e.Args[0].(*trigger)
			if err := m.guard(t, State(e.Src)); err != nil {
				e.Cancel(err)
			}
		},
		"leave_state": func(ctx context.Context, e *fsm.Event) {
			t := e.Args[0].(*trigger)
			if err := m.persistTransition(ctx, t, State(e.Src), State(e.Dst)); err != nil {
				e.Cancel(err)
			}
		},
	}
	m.fsms[FlowStrict] = fsm.NewFSM(string(Idle), fsmEvents(strictTable), cbs)
	m.fsms[FlowExplore] = fsm.NewFSM(string(Idle), fsmEvents(exploreTable), cbs)
	return m
}

// ID is the session id.
func (m *Machine) ID() string { return m.id }

func (m *Machine) setSnap(s Snapshot) {
	m.snap = s
	m.pos.Store(&Position{State: s.State, Mode: s.Mode, Exemption: s.Exemption})
	cp := s
	m.status.Store(&cp)
}

// Position is where the session is now.
func (m *Machine) Position() Position { return *m.pos.Load() }

// State is the current workflow state (what the policy sees as
// state_machine_state).
func (m *Machine) State() string { return string(m.pos.Load().State) }

// Allowed is the gate the router asks before every tool call: nil, a
// *ToolUnavailableError, or a *ReviewRequiredError (the call may run after
// a human approves it). It never blocks on a transition in progress.
func (m *Machine) Allowed(tool, path string, write bool) error {
	p := m.pos.Load()
	err := m.mg.rules.Allowed(*p, tool, path, write)
	if err != nil && m.mg.o.Catalog != nil {
		var tu *ToolUnavailableError
		if errors.As(err, &tu) {
			tu.Available = m.mg.rules.Available(*p, m.mg.o.Catalog())
		}
	}
	return err
}

// Explain answers "why can't I write path?" for the current position.
func (m *Machine) Explain(path string) Explanation { return m.mg.rules.Explain(*m.pos.Load(), path) }

// trigger carries one event through the fsm callbacks.
type trigger struct {
	ev       Event
	actor    string // "user", "ai", "kernel"
	tool     string // the tool or step that drove it
	note     string
	mutate   func(*Snapshot)
	meta     map[string]string
	approval *Approval
	exempt   *Exemption
	check    *Check // the budget's verdict for an explore commit
	security bool   // make a refusal's audit record durable
}

// TransitionError is a refused event: not in the table from this state,
// or its guard did not hold (Guard set, Reason is the guard's on_fail).
type TransitionError struct {
	Event    Event
	From     State
	Mode     Mode
	Flow     Flow
	Guard    bool
	Reason   string
	Detail   string
	Possible []Event
}

func (e *TransitionError) Error() string {
	s := fmt.Sprintf("%s refused in %s (%s flow): %s", e.Event, e.From, e.Flow, e.Reason)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap gives the structured user error.
func (e *TransitionError) Unwrap() error {
	code := CodeTransitionRefused
	if e.Guard {
		code = CodeGuardFailed
	}
	why := e.Reason
	if e.Detail != "" {
		why += ": " + e.Detail
	}
	fix := ""
	if len(e.Possible) > 0 {
		ps := make([]string, len(e.Possible))
		for i, p := range e.Possible {
			ps[i] = string(p)
		}
		fix = "possible from " + string(e.From) + ": " + strings.Join(ps, ", ")
	}
	return uerr.New(code, fmt.Sprintf("%s is not possible in %s", e.Event, e.From), why, fix)
}

func (m *Machine) possible(f Flow, st State) []Event {
	var out []Event
	for _, ev := range Events {
		if _, ok := Next(f, st, ev); ok {
			out = append(out, ev)
		}
	}
	return out
}

func (m *Machine) guardErr(t *trigger, from State, reason, detail string) *TransitionError {
	p := m.pos.Load()
	return &TransitionError{Event: t.ev, From: from, Mode: p.Mode, Flow: p.Flow(), Guard: true, Reason: reason, Detail: detail, Possible: m.possible(p.Flow(), from)}
}

// fire runs one event through the current flow's fsm. Called with m.mu.
// The caller's cancellation is honoured before the transition starts, never
// in the middle: a transition whose record is written always completes.
func (m *Machine) fire(ctx context.Context, t *trigger) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := m.pos.Load()
	flow := p.Flow()
	f := m.fsms[flow]
	f.SetState(string(m.snap.State))
	err := f.Event(context.WithoutCancel(ctx), string(t.ev), t)
	if err == nil {
		return nil
	}
	var te *TransitionError
	switch {
	case errors.As(err, &te):
	case errors.As(err, new(fsm.InvalidEventError)), errors.As(err, new(fsm.UnknownEventError)):
		te = &TransitionError{Event: t.ev, From: m.snap.State, Mode: p.Mode, Flow: flow,
			Reason: fmt.Sprintf("the %s flow has no %s transition from %s", flow, t.ev, m.snap.State), Possible: m.possible(flow, m.snap.State)}
	default:
		var ce fsm.CanceledError
		if errors.As(err, &ce) && ce.Err != nil {
			return ce.Err
		}
		return fmt.Errorf("workflow event %s in %s: %w", t.ev, m.snap.State, err)
	}
	m.auditRefusal(ctx, t, te)
	return te
}

// auditRefusal records a refused event (buffered, unless it changed the
// budget).
func (m *Machine) auditRefusal(ctx context.Context, t *trigger, te *TransitionError) {
	md := map[string]string{"event": string(t.ev), "from": string(te.From), "flow": string(te.Flow), "refused": "true"}
	for k, v := range t.meta {
		md[k] = v
	}
	_, err := m.mg.o.Audit.Append(context.WithoutCancel(ctx), audit.Event{Type: audit.EventStateTransition, Security: t.security, SessionID: m.id,
		SessionMode: string(te.Mode), State: string(te.From), ToolName: t.tool, Caller: callerOf(t.actor),
		PolicyDecision: audit.DecisionDenied, DenyReason: te.Error(), Metadata: md})
	if err != nil {
		m.mg.log.Error("cannot audit a refused workflow event", "session", m.id, "event", t.ev, "error", err)
	}
}

func callerOf(actor string) string {
	if actor == "" {
		return "kernel"
	}
	return actor
}

// guard checks the event's condition (looplab/fsm before_event).
func (m *Machine) guard(t *trigger, from State) error {
	flow := m.pos.Load().Flow()
	switch t.ev {
	case EvTestsRed:
		if detail := m.redGuard(); detail != "" {
			return m.guardErr(t, from, OnFailRed, detail)
		}
	case EvValidate:
		if cur := m.view.ViewHash(); cur == m.snap.WriteBase {
			return m.guardErr(t, from, OnFailChanges, "the tree has not changed since "+string(from)+" began (view "+short(cur)+")")
		}
	case EvTestsPassed:
		run, detail := m.freshRun()
		if detail == "" && !passes(flow, run.Status) {
			detail = describeRun(run)
		}
		if detail != "" {
			return m.guardErr(t, from, OnFailGreen, detail)
		}
	case EvTestsFailed:
		run, detail := m.freshRun()
		if detail == "" && passes(flow, run.Status) {
			detail = "the last run on this tree passed"
		}
		if detail != "" {
			return m.guardErr(t, from, OnFailFailing, detail)
		}
	case EvCommit:
		if t.approval == nil || !t.approval.Approved {
			return m.guardErr(t, from, OnFailApproved, "no approval of the merge was recorded")
		}
		if flow == FlowExplore && m.snap.Exemption == nil {
			var cov *float64
			if m.snap.GreenRun != nil {
				cov = m.snap.GreenRun.Coverage
			}
			c, err := m.mg.budget.CheckExplore(cov, m.id, m.view.ViewHash())
			t.check = &c
			if t.meta == nil {
				t.meta = map[string]string{}
			}
			t.meta["budget"] = c.Verdict.String()
			t.meta["budget_message"] = c.Message
			if err != nil || c.Verdict.Refused() {
				t.security = c.Verdict == BudgetLock
				detail := c.Message
				if err != nil {
					detail = err.Error()
				}
				return m.guardErr(t, from, OnFailBudget, detail)
			}
		}
	case EvExemption:
		if t.exempt == nil {
			return m.guardErr(t, from, OnFailExempt, "no exemption request was granted")
		}
	}
	return nil
}

func passes(f Flow, s testrun.Status) bool {
	return s == testrun.Green || (f == FlowExplore && s == testrun.NoTests)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	if h == "" {
		return "(none)"
	}
	return h
}

// freshRun returns the newest run if it was computed on the current tree.
func (m *Machine) freshRun() (*testrun.Run, string) {
	if m.lastRun == nil {
		return nil, "no test run has been recorded in this task"
	}
	if cur := m.view.ViewHash(); m.lastRun.ViewHash != cur {
		return nil, fmt.Sprintf("the last test run is stale: it ran on tree %s, the current tree is %s; run test.run again", short(m.lastRun.ViewHash), short(cur))
	}
	return m.lastRun, ""
}

func describeRun(r *testrun.Run) string {
	switch r.Status {
	case testrun.Green:
		return fmt.Sprintf("the run is green: all %d tests passed", r.Counts.Passed)
	case testrun.Red:
		return fmt.Sprintf("the run is red: %d of %d tests failed", r.Counts.Failed, r.Counts.Failed+r.Counts.Passed)
	case testrun.NoTests:
		return "the runner found no tests (no_tests)"
	case testrun.BuildFailed:
		if len(r.BuildErrors) > 0 {
			be := r.BuildErrors[0]
			return fmt.Sprintf("the build failed (build_error) at %s:%d: %s", be.File, be.Line, clip(be.Message, 200))
		}
		return "the build failed (build_error)"
	case testrun.Timeout:
		return "the run timed out (timeout)"
	case testrun.RunnerError:
		return "the test runner could not run (runner_error)"
	}
	return "the run has status " + string(r.Status)
}

// redGuard is the test_writing -> code_writing condition, "tests exist,
// were run, at least one fails", on the structured run: it must be
// red, computed on the current tree, and show a failing test or a build
// error (a package that has tests does not compile). Who wrote the failing
// test does not matter: a task may be "make the failing tests pass". A run
// whose tests all pass, however new, opens nothing.
// It returns "" when the guard holds, else what is missing.
func (m *Machine) redGuard() string {
	run, detail := m.freshRun()
	if detail != "" {
		return detail
	}
	if run.Status != testrun.Red {
		return describeRun(run)
	}
	for _, t := range run.Tests {
		if t.Status == testrun.Fail {
			return ""
		}
	}
	if len(run.BuildErrors) > 0 {
		return ""
	}
	return "the run is marked red but shows neither a failing test nor a build error"
}

// persistTransition writes the transition's state record and its durable
// audit record before the state changes (looplab/fsm leave_state). If
// either write fails, the transition does not happen.
func (m *Machine) persistTransition(ctx context.Context, t *trigger, from, to State) error {
	next := m.snap
	next.State = to
	if t.mutate != nil {
		t.mutate(&next)
	}
	rec := record{Kind: kindTransition, Event: t.ev, From: from, Snapshot: next, Actor: t.actor, Note: t.note}
	if err := m.append(ctx, &rec, m.auditTransition(&rec, t)); err != nil {
		return err
	}
	m.setSnap(next)
	return nil
}

func (m *Machine) auditTransition(rec *record, t *trigger) audit.Event {
	md := map[string]string{"event": string(rec.Event), "from": string(rec.From), "to": string(rec.Snapshot.State), "kind": rec.Kind}
	if rec.Event == "" {
		md["event"] = rec.Kind
	}
	ev := audit.Event{Type: audit.EventStateTransition, Security: true, SessionID: m.id, SessionMode: string(rec.Snapshot.Mode),
		State: string(rec.Snapshot.State), Caller: callerOf(rec.Actor), Input: rec.Note, Metadata: md}
	if t != nil {
		ev.ToolName = t.tool
		for k, v := range t.meta {
			md[k] = v
		}
	}
	return ev
}

// append seals rec as the next link of the chain, stores it, and writes
// its audit record durably; the audit record's sync also makes the state
// record durable (one database). A record whose audit write fails is
// removed again.
func (m *Machine) append(ctx context.Context, rec *record, ev audit.Event) error {
	rec.Seq = m.seq + 1
	rec.At = m.mg.o.Now().UnixMilli()
	if m.seq > 0 {
		rec.PrevHash = hex.EncodeToString(m.lastHash[:])
	}
	val, hash, err := seal(rec)
	if err != nil {
		return err
	}
	if err := putRecord(m.mg.db, m.id, rec.Seq, val); err != nil {
		return err
	}
	if ev.Metadata == nil {
		ev.Metadata = map[string]string{}
	}
	ev.Metadata["state_seq"] = strconv.FormatUint(rec.Seq, 10)
	ev.Metadata["state_hash"] = hex.EncodeToString(hash[:])
	if _, err := m.mg.o.Audit.Append(context.WithoutCancel(ctx), ev); err != nil {
		if derr := dropRecord(m.mg.db, m.id, rec.Seq, nil); derr != nil {
			m.mg.log.Error("cannot remove an unaudited state record", "session", m.id, "seq", rec.Seq, "error", derr)
		}
		return fmt.Errorf("audit %s of session %s: %w", ev.Type, m.id, err)
	}
	m.seq, m.lastHash = rec.Seq, hash
	return nil
}

// Outcome is what a driving call did.
type Outcome struct {
	From State `json:"from"`
	To   State `json:"to"`
	// Events are the transitions made, in order (none when the call only
	// recorded something).
	Events  []Event `json:"events,omitempty"`
	Warning string  `json:"warning,omitempty"`
}

// run fires events in order, stopping at the first refusal.
func (m *Machine) run(ctx context.Context, ts ...*trigger) (Outcome, error) {
	out := Outcome{From: m.snap.State}
	for _, t := range ts {
		if err := m.fire(ctx, t); err != nil {
			out.To = m.snap.State
			return out, err
		}
		out.Events = append(out.Events, t.ev)
		if t.check != nil && t.check.Verdict == BudgetWarn {
			out.Warning = t.check.Message
		}
	}
	out.To = m.snap.State
	return out, nil
}

// Text bounds for what the AI or the user hands the machine.
const (
	maxTaskRunes   = 4000
	maxReasonRunes = 2000
	maxPaths       = 100
	maxPathBytes   = 4096
)

// clip makes s valid UTF-8 (it may come from a model) and bounds it.
func clip(s string, n int) string {
	return textsafe.Cap(strings.ToValidUTF8(s, "\uFFFD"), n)
}

// Start begins a task on a user message (idle -> planning). When the
// tech-debt budget has locked explore mode, an explore or debug session is
// switched to strict first (recorded as a mode change).
func (m *Machine) Start(ctx context.Context, task string) (Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap.State == Idle && m.snap.Mode != Strict {
		lock, err := m.mg.budget.Locked()
		if err != nil {
			return Outcome{From: m.snap.State, To: m.snap.State}, err
		}
		if lock != nil {
			why := fmt.Sprintf("explore mode is locked by the tech-debt budget since %s (coverage %.1f%% against a %.1f%% baseline); a strict commit that restores coverage unlocks it",
				lock.At.Format(time.RFC3339), lock.Coverage, lock.Baseline)
			if err := m.changeMode(ctx, Strict, "kernel", "budget_locked", why); err != nil {
				return Outcome{From: m.snap.State, To: m.snap.State}, err
			}
		}
	}
	m.lastRun = nil
	m.runInfo.Store(nil)
	task = clip(task, maxTaskRunes)
	return m.run(ctx, &trigger{ev: EvStart, actor: "user", note: task, mutate: func(s *Snapshot) {
		*s = s.newTask()
		s.Task = task
	}})
}

// PlanComplete ends planning (the plan.complete tool): strict mode goes to
// test_writing, explore and debug to exploring.
func (m *Machine) PlanComplete(ctx context.Context, plan, actor string) (Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	plan = clip(plan, maxTaskRunes)
	view := m.view.ViewHash()
	return m.run(ctx, &trigger{ev: EvPlanComplete, actor: actor, tool: ToolPlanComplete, note: plan, mutate: func(s *Snapshot) {
		s.Plan = plan
		s.WriteBase = view
	}})
}

// RecordTestRun judges a test.run result the kernel stamped with the
// view it ran on (run.ViewHash). In test_writing a red run on the current
// tree opens code_writing; in code_writing, exploring and
// retroactive_testing a run on a changed tree validates it (validating,
// then reviewing on green, or back to writing); in validating it decides.
// A run that moves nothing is only recorded. A refused move is returned as
// a *TransitionError (the run is still recorded); other errors mean the
// run could not be judged.
func (m *Machine) RecordTestRun(ctx context.Context, run testrun.Run) (Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := Outcome{From: m.snap.State, To: m.snap.State}
	if !run.Status.Valid() {
		return out, uerr.New(CodeBadRun, fmt.Sprintf("test run with unknown status %q", run.Status), "only testrun's classification is judged", "decode the plugin's output with testrun.Decode")
	}
	if run.ViewHash == "" {
		return out, uerr.New(CodeBadRun, "test run without a view hash", "the kernel stamps every run with the view it mounted; an unstamped run cannot be judged fresh", "set run.ViewHash from the view the call ran on")
	}
	r := run
	m.lastRun = &r
	f := factsOf(run, m.mg.o.Now())
	m.runInfo.Store(&f)
	flow := m.pos.Load().Flow()
	verdict := func() *trigger {
		facts := f
		if passes(flow, run.Status) {
			return &trigger{ev: EvTestsPassed, actor: "kernel", tool: ToolTestRun, meta: runMeta(run), mutate: func(s *Snapshot) { s.GreenRun = &facts }}
		}
		return &trigger{ev: EvTestsFailed, actor: "kernel", tool: ToolTestRun, meta: runMeta(run)}
	}
	switch m.snap.State {
	case TestWriting:
		facts := f
		return m.run(ctx, &trigger{ev: EvTestsRed, actor: "kernel", tool: ToolTestRun, meta: runMeta(run), mutate: func(s *Snapshot) {
			s.RedRun = &facts
			s.WriteBase = facts.ViewHash
		}})
	case CodeWriting, Exploring, RetroactiveTesting:
		if _, detail := m.freshRun(); detail != "" {
			return out, m.guardErr(&trigger{ev: EvValidate}, m.snap.State, OnFailStale, detail)
		}
		if run.ViewHash == m.snap.WriteBase {
			return out, nil // nothing changed since writing began: an informative run
		}
		return m.run(ctx, &trigger{ev: EvValidate, actor: "kernel", tool: ToolTestRun, meta: runMeta(run)}, verdict())
	case Validating:
		return m.run(ctx, verdict())
	case Planning:
		return out, nil
	}
	return out, &TransitionError{Event: EvValidate, From: m.snap.State, Mode: m.snap.Mode, Flow: flow,
		Reason: "test runs are not judged in " + string(m.snap.State), Possible: m.possible(flow, m.snap.State)}
}

func runMeta(r testrun.Run) map[string]string {
	md := map[string]string{"run_status": string(r.Status), "view_hash": r.ViewHash,
		"tests_passed": strconv.Itoa(r.Counts.Passed), "tests_failed": strconv.Itoa(r.Counts.Failed)}
	if r.Coverage != nil {
		md["coverage"] = strconv.FormatFloat(r.Coverage.Percent, 'f', 2, 64)
	}
	return md
}

// Review records the merge review's outcome (auto-merge or a human's
// /approve or /reject): an approval moves reviewing -> committing (in the
// explore flow only within the tech-debt budget), a rejection goes back
// to writing.
func (m *Machine) Review(ctx context.Context, a Approval) (Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a.At.IsZero() {
		a.At = m.mg.o.Now().UTC()
	}
	a.By, a.Note = clip(a.By, 200), clip(a.Note, maxReasonRunes)
	meta := map[string]string{"approved": strconv.FormatBool(a.Approved), "approved_by": a.By, "auto": strconv.FormatBool(a.Auto)}
	if !a.Approved {
		return m.run(ctx, &trigger{ev: EvReject, actor: callerOf(a.By), note: a.Note, meta: meta, mutate: func(s *Snapshot) {
			s.Approval, s.GreenRun = nil, nil
		}})
	}
	ap := a
	t := &trigger{ev: EvCommit, actor: callerOf(a.By), note: a.Note, meta: meta, approval: &ap}
	t.mutate = func(s *Snapshot) {
		s.Approval = &ap
		if t.check != nil && t.check.Verdict == BudgetWarn {
			s.Warning = t.check.Message
		}
	}
	return m.run(ctx, t)
}

// RetroTest is the user's choice to add tests before an explore merge
// (reviewing -> retroactive_testing).
func (m *Machine) RetroTest(ctx context.Context) (Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	view := m.view.ViewHash()
	return m.run(ctx, &trigger{ev: EvRetroTest, actor: "user", mutate: func(s *Snapshot) {
		s.WriteBase, s.GreenRun, s.Approval = view, nil, nil
	}})
}

// Committed records that the commit is done (committing -> idle). After a
// strict commit (not under an exemption) the coverage baseline is updated
// from the validated run, which lifts an explore lock once coverage is
// restored.
func (m *Machine) Committed(ctx context.Context, commitRef string) (Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta := map[string]string{"commit": clip(commitRef, 200)}
	var budgetErr error
	if m.snap.State == Committing {
		switch {
		case m.snap.Exemption != nil:
			meta["budget"] = "exempt: " + string(m.snap.Exemption.Category)
		case m.snap.Mode == Strict:
			var cov *float64
			view := ""
			if m.snap.GreenRun != nil {
				cov, view = m.snap.GreenRun.Coverage, m.snap.GreenRun.ViewHash
			}
			unlocked, still, err := m.mg.budget.StrictCommit(cov, m.id, view)
			budgetErr = err
			switch {
			case err != nil:
				meta["budget"] = "baseline not updated: " + err.Error()
			case cov == nil:
				meta["budget"] = "coverage not measured; baseline unchanged"
			default:
				meta["budget"] = fmt.Sprintf("baseline %.2f%%", *cov)
			}
			if unlocked {
				meta["budget_unlocked"] = "true"
			} else if still != nil {
				meta["budget_locked"] = fmt.Sprintf("still locked: coverage must reach %.2f%%", still.Baseline)
			}
		}
	}
	out, err := m.run(ctx, &trigger{ev: EvCommitted, actor: "kernel", note: commitRef, meta: meta, mutate: func(s *Snapshot) { *s = s.newTask() }})
	if err == nil && budgetErr != nil {
		err = budgetErr
	}
	return out, err
}

// Cancel returns to idle from any state (the user cancelled or reset the
// session). The changeset is left alone: discarding it is the workspace's
// decision.
func (m *Machine) Cancel(ctx context.Context, reason string) (Outcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap.State == Idle {
		return Outcome{From: Idle, To: Idle}, &TransitionError{Event: EvCancel, From: Idle, Mode: m.snap.Mode, Flow: m.pos.Load().Flow(),
			Reason: "nothing to cancel: the session is idle", Possible: m.possible(m.pos.Load().Flow(), Idle)}
	}
	return m.run(ctx, &trigger{ev: EvCancel, actor: "user", note: clip(reason, maxReasonRunes), mutate: func(s *Snapshot) { *s = s.newTask() }})
}

// Status is the session's workflow status for the agent and the REPL.
type Status struct {
	Session      string     `json:"session"`
	State        State      `json:"state"`
	Mode         Mode       `json:"mode"`
	Flow         Flow       `json:"flow"`
	ChangesetRef string     `json:"changeset_ref,omitempty"`
	Task         string     `json:"task,omitempty"`
	Plan         string     `json:"plan,omitempty"`
	Exemption    *Exemption `json:"exemption,omitempty"`
	LastRun      *RunFacts  `json:"last_run,omitempty"`
	Warning      string     `json:"warning,omitempty"`
	// Writable says in words which paths can be written now.
	Writable  string        `json:"writable"`
	Available []string      `json:"available_tools"`
	Budget    BudgetSummary `json:"budget"`
}

// BudgetSummary is the tech-debt budget as Status shows it.
type BudgetSummary struct {
	HasBaseline bool    `json:"has_baseline"`
	Baseline    float64 `json:"baseline,omitempty"`
	Locked      bool    `json:"locked"`
	Lock        *Lock   `json:"lock,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// Status returns the current status without waiting for a transition.
func (m *Machine) Status() Status {
	s := *m.status.Load()
	p := Position{State: s.State, Mode: s.Mode, Exemption: s.Exemption}
	var cat []ToolInfo
	if m.mg.o.Catalog != nil {
		cat = m.mg.o.Catalog()
	}
	st := Status{Session: s.Session, State: s.State, Mode: s.Mode, Flow: p.Flow(), ChangesetRef: s.ChangesetRef, Task: s.Task, Plan: s.Plan,
		Exemption: s.Exemption, LastRun: m.runInfo.Load(), Warning: s.Warning, Writable: m.mg.rules.writableText(p), Available: m.mg.rules.Available(p, cat)}
	bl, ok, err := m.mg.budget.Load()
	st.Budget = BudgetSummary{HasBaseline: ok, Baseline: bl.Percent, Locked: bl.Lock != nil, Lock: bl.Lock}
	if err != nil {
		st.Budget.Error = err.Error()
	}
	return st
}

// History returns up to limit newest persisted changes of the session
// (all when limit <= 0), oldest first.
func (m *Machine) History(limit int) ([]HistoryEntry, error) {
	return readHistory(m.mg.db, m.id, limit)
}

// writableText describes what is writable at p.
func (r *Rules) writableText(p Position) string {
	switch p.State {
	case TestWriting, RetroactiveTesting:
		return "test files only (" + r.testPathList() + ")"
	case CodeWriting:
		return "source and exempt files; test files are read-only"
	case Exploring:
		if p.Exemption != nil {
			return "only the exempted paths: " + strings.Join(p.Exemption.Paths, ", ")
		}
		return "any project file the policy allows"
	}
	return "nothing"
}
