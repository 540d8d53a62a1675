package sandbox

import (
	"errors"
	"fmt"
	"sync"
)

// State is a sandbox's lifecycle state.
type State string

const (
	StateCreating  State = "CREATING"
	StateRunning   State = "RUNNING"
	StateStopping  State = "STOPPING"
	StateCleanup   State = "CLEANUP"
	StateDestroyed State = "DESTROYED"
	StateFailed    State = "FAILED"
)

// transitions is the state machine.
var transitions = map[State][]State{
	StateCreating: {StateRunning, StateFailed},
	StateRunning:  {StateStopping, StateFailed},
	StateStopping: {StateCleanup, StateFailed},
	StateFailed:   {StateCleanup},
	StateCleanup:  {StateDestroyed},
}

// ErrBadTransition is returned for a transition the state machine forbids.
var ErrBadTransition = errors.New("sandbox lifecycle: transition not allowed")

// Lifecycle tracks one sandbox's state and runs its cleanup exactly once.
type Lifecycle struct {
	mu      sync.Mutex
	state   State
	history []State
	reason  string
	steps   []CleanupStep
	done    bool
	errs    []error
}

// CleanupStep is one independent cleanup action.
type CleanupStep struct {
	Name string
	Run  func() error
}

// NewLifecycle starts in CREATING.
func NewLifecycle() *Lifecycle {
	return &Lifecycle{state: StateCreating, history: []State{StateCreating}}
}

// State returns the current state.
func (l *Lifecycle) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// History returns every state entered, in order.
func (l *Lifecycle) History() []State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]State(nil), l.history...)
}

// Reason is why the sandbox failed ("" unless FAILED was entered).
func (l *Lifecycle) Reason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reason
}

// To moves to next, or returns ErrBadTransition.
func (l *Lifecycle) To(next State) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.toLocked(next)
}

func (l *Lifecycle) toLocked(next State) error {
	for _, s := range transitions[l.state] {
		if s == next {
			l.state = next
			l.history = append(l.history, next)
			return nil
		}
	}
	return fmt.Errorf("%w: %s → %s", ErrBadTransition, l.state, next)
}

// Fail enters FAILED from CREATING, RUNNING or STOPPING and records why. It
// is a no-op in any later state.
func (l *Lifecycle) Fail(reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.toLocked(StateFailed) == nil {
		l.reason = reason
	}
}

// OnCleanup registers a step. Steps run in registration order.
func (l *Lifecycle) OnCleanup(name string, run func() error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, CleanupStep{Name: name, Run: run})
}

// Cleanup moves through STOPPING (when RUNNING) and CLEANUP to DESTROYED,
// running every registered step once. Steps are independent: a failing or
// panicking step does not stop the next one. Cleanup is idempotent: later
// calls return the first call's result without running anything.
func (l *Lifecycle) Cleanup() error {
	l.mu.Lock()
	if l.done {
		err := errors.Join(l.errs...)
		l.mu.Unlock()
		return err
	}
	l.done = true
	switch l.state {
	case StateCreating:
		_ = l.toLocked(StateFailed)
		if l.reason == "" {
			l.reason = "cleaned up before it ran"
		}
	case StateRunning:
		_ = l.toLocked(StateStopping)
	}
	_ = l.toLocked(StateCleanup)
	steps := l.steps
	l.mu.Unlock()

	var errs []error
	for _, s := range steps {
		if err := runStep(s); err != nil {
			errs = append(errs, fmt.Errorf("cleanup %s: %w", s.Name, err))
		}
	}
	l.mu.Lock()
	l.errs = errs
	_ = l.toLocked(StateDestroyed)
	l.mu.Unlock()
	return errors.Join(errs...)
}

func runStep(s CleanupStep) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return s.Run()
}
