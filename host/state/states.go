package state

import (
	"slices"

	"github.com/looplab/fsm"
)

// State is a workflow state.
type State string

// The nine workflow states.
const (
	Idle               State = "idle"
	Planning           State = "planning"
	TestWriting        State = "test_writing"
	CodeWriting        State = "code_writing"
	Validating         State = "validating"
	Reviewing          State = "reviewing"
	Committing         State = "committing"
	Exploring          State = "exploring"
	RetroactiveTesting State = "retroactive_testing"
)

// States lists every state, in workflow order.
var States = []State{Idle, Planning, TestWriting, CodeWriting, Validating, Reviewing, Committing, Exploring, RetroactiveTesting}

// Valid reports whether s is one of the nine states.
func (s State) Valid() bool { return slices.Contains(States, s) }

// Mode is a session mode.
type Mode string

// The three modes.
const (
	Strict  Mode = "strict"
	Explore Mode = "explore"
	Debug   Mode = "debug"
)

// Modes lists every mode.
var Modes = []Mode{Strict, Explore, Debug}

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool { return m == Strict || m == Explore || m == Debug }

// Flow is the transition table a session follows. Strict mode follows the
// strict table; explore and debug follow the explore table, and so does a
// strict-mode task that was granted a TDD exemption (granted
// exemptions enter the exploring state and reuse the explore-mode flow).
type Flow string

// The two transition tables.
const (
	FlowStrict  Flow = "strict"
	FlowExplore Flow = "explore"
)

// Event names a transition trigger. Every event is judged against the
// current flow's table and its guard; the triggers are the kernel tools and
// the kernel's own steps (a recorded test run, a review decision, a
// finished commit, the user).
type Event string

// The events of both tables.
const (
	// EvStart: a user message starts a task (idle -> planning).
	EvStart Event = "start"
	// EvPlanComplete: the AI called plan.complete.
	EvPlanComplete Event = "plan_complete"
	// EvExemption: a TDD exemption was granted (strict planning or
	// test_writing -> exploring, explore flow from then on).
	EvExemption Event = "exemption_granted"
	// EvTestsRed: a red run on the current tree (test_writing -> code_writing).
	EvTestsRed Event = "tests_red"
	// EvValidate: changes exist and tests are run on them (code_writing,
	// exploring or retroactive_testing -> validating).
	EvValidate Event = "validate"
	// EvTestsPassed: the validating run passed (validating -> reviewing).
	EvTestsPassed Event = "tests_passed"
	// EvTestsFailed: the validating run did not pass (validating -> back).
	EvTestsFailed Event = "tests_failed"
	// EvCommit: the merge was approved (reviewing -> committing).
	EvCommit Event = "commit"
	// EvReject: the merge was rejected (reviewing -> back to writing).
	EvReject Event = "reject"
	// EvRetroTest: the user chose to add tests before merging (explore).
	EvRetroTest Event = "retro_test"
	// EvCommitted: the commit is complete (committing -> idle).
	EvCommitted Event = "committed"
	// EvCancel: the user cancelled or reset the session (any -> idle).
	EvCancel Event = "cancel"
)

// Events lists every event.
var Events = []Event{EvStart, EvPlanComplete, EvExemption, EvTestsRed, EvValidate, EvTestsPassed, EvTestsFailed, EvCommit, EvReject, EvRetroTest, EvCommitted, EvCancel}

// Transition is one row of a table.
type Transition struct {
	Event Event
	From  []State
	To    State
}

// notIdle is every state a cancel leaves.
var notIdle = []State{Planning, TestWriting, CodeWriting, Validating, Reviewing, Committing, Exploring, RetroactiveTesting}

// strictTable is the strict-mode table. The exemption row is the
// seed's "TDD Exemption Mechanism": a granted exemption enters exploring.
var strictTable = []Transition{
	{EvStart, []State{Idle}, Planning},
	{EvPlanComplete, []State{Planning}, TestWriting},
	{EvExemption, []State{Planning, TestWriting}, Exploring},
	{EvTestsRed, []State{TestWriting}, CodeWriting},
	{EvValidate, []State{CodeWriting}, Validating},
	{EvTestsPassed, []State{Validating}, Reviewing},
	{EvTestsFailed, []State{Validating}, CodeWriting},
	{EvCommit, []State{Reviewing}, Committing},
	{EvReject, []State{Reviewing}, CodeWriting},
	{EvCommitted, []State{Committing}, Idle},
	{EvCancel, notIdle, Idle},
}

// exploreTable is the explore-mode table (debug mode uses it too).
// reviewing -> exploring on rejection is fluffy's addition: the seed lists
// no way back from a rejected explore merge except cancelling, which would
// throw the work away (docs/decisions/workflow-machine.md).
var exploreTable = []Transition{
	{EvStart, []State{Idle}, Planning},
	{EvPlanComplete, []State{Planning}, Exploring},
	{EvValidate, []State{Exploring, RetroactiveTesting}, Validating},
	{EvTestsPassed, []State{Validating}, Reviewing},
	{EvTestsFailed, []State{Validating}, Exploring},
	{EvCommit, []State{Reviewing}, Committing},
	{EvReject, []State{Reviewing}, Exploring},
	{EvRetroTest, []State{Reviewing}, RetroactiveTesting},
	{EvCommitted, []State{Committing}, Idle},
	{EvCancel, notIdle, Idle},
}

// Table returns the transition table of flow f (a copy).
func Table(f Flow) []Transition {
	t := strictTable
	if f == FlowExplore {
		t = exploreTable
	}
	out := make([]Transition, len(t))
	for i, r := range t {
		out[i] = Transition{r.Event, slices.Clone(r.From), r.To}
	}
	return out
}

// Next returns the state event ev leads to from st in flow f, if the table
// lists it.
func Next(f Flow, st State, ev Event) (State, bool) {
	t := strictTable
	if f == FlowExplore {
		t = exploreTable
	}
	for _, r := range t {
		if r.Event == ev && slices.Contains(r.From, st) {
			return r.To, true
		}
	}
	return "", false
}

// fsmEvents converts a table to looplab/fsm's description.
func fsmEvents(t []Transition) fsm.Events {
	out := make(fsm.Events, 0, len(t))
	for _, r := range t {
		src := make([]string, len(r.From))
		for i, s := range r.From {
			src[i] = string(s)
		}
		out = append(out, fsm.EventDesc{Name: string(r.Event), Src: src, Dst: string(r.To)})
	}
	return out
}
