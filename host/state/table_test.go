package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// realRuns runs the fixtures the table tests judge, once per test.
type realRuns struct {
	redV, greenV, noneV *dirView
	red, green, none    testrun.Run
}

func newRealRuns(t *testing.T) *realRuns {
	t.Helper()
	mk := func(fixture string, changed ...string) *dirView {
		v := &dirView{dir: t.TempDir()}
		copyDir(t, "testdata/fixtures/"+fixture, v.dir)
		v.setChanged(changed...)
		return v
	}
	r := &realRuns{redV: mk("undefined", "calc_test.go"), greenV: mk("green", "calc.go"), noneV: mk("notests", "calc.go")}
	r.red, r.green, r.none = goTest(t, r.redV), goTest(t, r.greenV), goTest(t, r.noneV)
	if r.red.Status != testrun.Red || r.green.Status != testrun.Green || r.none.Status != testrun.NoTests {
		t.Fatalf("fixture runs: %s %s %s", r.red.Status, r.green.Status, r.none.Status)
	}
	return r
}

// placed opens a session and puts its machine at (flow, st) with the
// given view and newest run.
func placed(t *testing.T, e *env, id string, flow Flow, st State, v *dirView, run *testrun.Run) *Machine {
	t.Helper()
	m, err := e.mg.Open(context.Background(), SessionConfig{ID: id, View: v})
	if err != nil {
		t.Fatal(err)
	}
	mode := Strict
	if flow == FlowExplore {
		mode = Explore
	}
	m.mu.Lock()
	m.setSnap(Snapshot{Session: id, State: st, Mode: mode, WriteBase: "an-older-tree"})
	if run != nil {
		r := *run
		m.lastRun = &r
	}
	m.mu.Unlock()
	return m
}

func fireLocked(m *Machine, t *trigger) (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.fire(context.Background(), t)
	return m.snap.State, err
}

// TestTransitionTablesExhaustive checks every (flow, state, event) triple:
// a listed transition succeeds (its guard satisfied by real runs) and is
// persisted; anything else is refused without moving.
func TestTransitionTablesExhaustive(t *testing.T) {
	e := newEnv(t, nil)
	rr := newRealRuns(t)
	listed, n := 0, 0
	for _, flow := range []Flow{FlowStrict, FlowExplore} {
		for _, st := range States {
			for _, ev := range Events {
				n++
				to, ok := Next(flow, st, ev)
				v, run := rr.greenV, &rr.green
				if ev == EvTestsRed || ev == EvTestsFailed {
					v, run = rr.redV, &rr.red
				}
				m := placed(t, e, fmt.Sprintf("x%d", n), flow, st, v, run)
				tr := &trigger{ev: ev, actor: "test", approval: &Approval{Approved: true, By: "test"}}
				if ev == EvExemption {
					tr.exempt = &Exemption{Category: Documentation, Paths: []string{"README.md"}}
				}
				got, err := fireLocked(m, tr)
				name := fmt.Sprintf("%s flow: %s --%s-->", flow, st, ev)
				if ok {
					listed++
					if err != nil || got != to {
						t.Errorf("%s %s: got %s, %v", name, to, got, err)
						continue
					}
					h, herr := m.History(1)
					if herr != nil || len(h) != 1 || h[0].To != to || h[0].Event != ev || h[0].From != st {
						t.Errorf("%s: not persisted: %+v %v", name, h, herr)
					}
					continue
				}
				var te *TransitionError
				if !errors.As(err, &te) || te.Guard || got != st {
					t.Errorf("%s (not in the table): state %s, err %v", name, got, err)
					continue
				}
				if !strings.Contains(te.Reason, fmt.Sprintf("has no %s transition from %s", ev, st)) {
					t.Errorf("%s: reason %q", name, te.Reason)
				}
			}
		}
	}
	rows := 0
	for _, f := range []Flow{FlowStrict, FlowExplore} {
		for _, r := range Table(f) {
			rows += len(r.From)
		}
	}
	if listed != rows || n != 2*len(States)*len(Events) {
		t.Fatalf("checked %d listed of %d rows, %d triples", listed, rows, n)
	}
}

// TestGuardRefusals checks each guarded transition refuses with its on_fail
// message when its condition does not hold.
func TestGuardRefusals(t *testing.T) {
	e := newEnv(t, nil)
	rr := newRealRuns(t)
	approved := &Approval{Approved: true, By: "u"}
	cases := []struct {
		name   string
		flow   Flow
		from   State
		ev     Event
		view   *dirView
		run    *testrun.Run
		setup  func(m *Machine, tr *trigger)
		reason string
		ok     bool
	}{
		{name: "green is not red", flow: FlowStrict, from: TestWriting, ev: EvTestsRed, view: rr.greenV, run: &rr.green, reason: OnFailRed},
		{name: "no run is not red", flow: FlowStrict, from: TestWriting, ev: EvTestsRed, view: rr.redV, reason: OnFailRed},
		{name: "red is not green", flow: FlowStrict, from: Validating, ev: EvTestsPassed, view: rr.redV, run: &rr.red, reason: OnFailGreen},
		{name: "no_tests is not green in strict", flow: FlowStrict, from: Validating, ev: EvTestsPassed, view: rr.noneV, run: &rr.none, reason: OnFailGreen},
		{name: "no_tests passes explore", flow: FlowExplore, from: Validating, ev: EvTestsPassed, view: rr.noneV, run: &rr.none, ok: true},
		{name: "red is not green in explore", flow: FlowExplore, from: Validating, ev: EvTestsPassed, view: rr.redV, run: &rr.red, reason: OnFailGreen},
		{name: "stale green", flow: FlowStrict, from: Validating, ev: EvTestsPassed, view: rr.redV, run: &rr.green, reason: OnFailGreen},
		{name: "green cannot go back", flow: FlowStrict, from: Validating, ev: EvTestsFailed, view: rr.greenV, run: &rr.green, reason: OnFailFailing},
		{name: "no changes", flow: FlowStrict, from: CodeWriting, ev: EvValidate, view: rr.greenV, run: &rr.green, reason: OnFailChanges,
			setup: func(m *Machine, _ *trigger) { m.snap.WriteBase = m.view.ViewHash() }},
		{name: "no approval", flow: FlowStrict, from: Reviewing, ev: EvCommit, view: rr.greenV, reason: OnFailApproved,
			setup: func(_ *Machine, tr *trigger) { tr.approval = nil }},
		{name: "rejected is not approved", flow: FlowExplore, from: Reviewing, ev: EvCommit, view: rr.greenV, reason: OnFailApproved,
			setup: func(_ *Machine, tr *trigger) { tr.approval = &Approval{Approved: false} }},
		{name: "no exemption granted", flow: FlowStrict, from: Planning, ev: EvExemption, view: rr.greenV, reason: OnFailExempt},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := placed(t, e, fmt.Sprintf("g%d", i), c.flow, c.from, c.view, c.run)
			tr := &trigger{ev: c.ev, approval: approved}
			if c.setup != nil {
				m.mu.Lock()
				c.setup(m, tr)
				m.mu.Unlock()
			}
			got, err := fireLocked(m, tr)
			if c.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var te *TransitionError
			if !errors.As(err, &te) || !te.Guard || te.Reason != c.reason || got != c.from {
				t.Fatalf("got %s, %v; want guard refusal %q", got, err, c.reason)
			}
			if te.Detail == "" {
				t.Fatal("refusal without detail")
			}
		})
	}
}

// TestCancelFromEveryState: any state -> idle, and a new task starts clean.
func TestCancelFromEveryState(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for i, st := range States {
		for _, flow := range []Flow{FlowStrict, FlowExplore} {
			m := placed(t, e, fmt.Sprintf("c%d%s", i, flow), flow, st, &dirView{dir: t.TempDir()}, nil)
			out, err := m.Cancel(ctx, "changed my mind")
			if st == Idle {
				var te *TransitionError
				if !errors.As(err, &te) || !strings.Contains(te.Reason, "nothing to cancel") {
					t.Fatalf("cancel in idle: %v", err)
				}
				continue
			}
			if err != nil || out.To != Idle || m.Position().State != Idle || m.Status().Task != "" {
				t.Fatalf("cancel from %s (%s): %+v %v", st, flow, out, err)
			}
		}
	}
}
