package scheduler

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TaskType is the task type. The scheduler does not interpret it;
// it is recorded for observers.
type TaskType string

// The task types.
const (
	AIGenerate TaskType = "ai_generate"
	TestRun    TaskType = "test_run"
	Validate   TaskType = "validate"
	Review     TaskType = "review"
	Commit     TaskType = "commit"
)

func (t TaskType) valid() bool {
	switch t {
	case AIGenerate, TestRun, Validate, Review, Commit:
		return true
	}
	return false
}

// Priority is 1 (highest, system tasks) to 5 (idle).
type Priority int

// The priority range.
const (
	PrioritySystem Priority = 1
	PriorityHigh   Priority = 2
	PriorityNormal Priority = 3
	PriorityLow    Priority = 4
	PriorityIdle   Priority = 5
)

// TaskState is the task state.
type TaskState string

// Task states.
const (
	Queued            TaskState = "queued"
	WaitingDependency TaskState = "waiting_dependency"
	Running           TaskState = "running"
	Paused            TaskState = "paused"
	Completed         TaskState = "completed"
	Failed            TaskState = "failed"
	Cancelled         TaskState = "cancelled"
)

// Final reports whether s is an end state.
func (s TaskState) Final() bool { return s == Completed || s == Failed || s == Cancelled }

// Signal is what the kernel tells a task's plugin around a pause:
// PAUSE_SIGNAL before pausing, with a grace period to save state;
// RESUME_SIGNAL after resuming).
type Signal string

// The two signals.
const (
	SignalPause  Signal = "PAUSE_SIGNAL"
	SignalResume Signal = "RESUME_SIGNAL"
)

// Preemptible is how the scheduler pauses, resumes or destroys a running
// task's sandbox. The router provides it per task (Container wraps the
// runtime adapter); a task without one is never preempted.
type Preemptible interface {
	// Notify delivers a signal to the task's plugin. For SignalPause the
	// scheduler waits until Notify returns or the grace period (1 s) ends,
	// whichever comes first, then pauses.
	Notify(ctx context.Context, s Signal) error
	Pause(ctx context.Context) error
	Resume(ctx context.Context) error
	// Destroy releases the sandbox for good (memory is tight).
	Destroy(ctx context.Context) error
}

// Task is one unit of work. The scheduler knows its order, resources and
// dependencies, never what Run does.
type Task struct {
	ID       string
	Type     TaskType
	Priority Priority
	// Template is the sandbox template the task runs in (ai-provider,
	// code-executor, policy-sandbox, ...); its concurrency limit applies.
	Template string
	// Dependencies are ids of tasks submitted earlier that must complete
	// first; if one fails, this task fails with "dependency failed: <id>".
	Dependencies []string
	// MaxDuration is how long the task may run; one past 80 % of it is
	// left to finish rather than preempted. Zero: never "almost done".
	MaxDuration time.Duration
	// Run does the work. ctx ends when the task is cancelled or destroyed.
	Run func(ctx context.Context) error
	// Sandbox lets the scheduler preempt the task; nil: never preempted.
	Sandbox Preemptible
}

// Error codes.
const (
	CodeBadTask       = "SCHED_BAD_TASK"
	CodeDuplicate     = "SCHED_DUPLICATE_TASK"
	CodeUnknownDep    = "SCHED_UNKNOWN_DEPENDENCY"
	CodeUnknownTask   = "SCHED_UNKNOWN_TASK"
	CodeClosed        = "SCHED_CLOSED"
	CodeTaskFailed    = "SCHED_TASK_FAILED"
	CodeTaskCancelled = "SCHED_TASK_CANCELLED"
	CodeBadConfig     = "SCHED_BAD_CONFIG"
)

// validID: 1 to 256 bytes of printable text (no control characters, valid
// UTF-8); ids only name tasks for dependencies and logs.
func validID(id string) bool {
	if id == "" || len(id) > 256 || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

func (t *Task) validate() error {
	bad := func(why string) error {
		return uerr.New(CodeBadTask, fmt.Sprintf("task %q cannot be scheduled", t.ID), why, "fix the task before submitting it")
	}
	switch {
	case !validID(t.ID):
		return bad("an id is 1 to 256 bytes of printable text")
	case !t.Type.valid():
		return bad(fmt.Sprintf("unknown type %q (ai_generate, test_run, validate, review, commit)", t.Type))
	case t.Priority < PrioritySystem || t.Priority > PriorityIdle:
		return bad(fmt.Sprintf("priority %d is outside 1..5", t.Priority))
	case t.Template == "":
		return bad("no sandbox template")
	case t.Run == nil:
		return bad("no Run function")
	case t.MaxDuration < 0:
		return bad("negative MaxDuration")
	}
	seen := map[string]bool{}
	for _, d := range t.Dependencies {
		if d == t.ID {
			return bad("a task cannot depend on itself")
		}
		if seen[d] {
			return bad("dependency " + d + " is listed twice")
		}
		seen[d] = true
	}
	return nil
}

// TaskError is the outcome of a task that did not complete.
type TaskError struct {
	ID     string
	State  TaskState // Failed or Cancelled
	Reason string    // e.g. "dependency failed: A"
	Err    error     // what Run returned, if it ran
}

func (e *TaskError) Error() string { return fmt.Sprintf("task %s %s: %s", e.ID, e.State, e.Reason) }

// Unwrap gives Run's error when there is one, else the structured error.
func (e *TaskError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	code := CodeTaskFailed
	if e.State == Cancelled {
		code = CodeTaskCancelled
	}
	return uerr.New(code, "task "+e.ID+" "+string(e.State), e.Reason, "")
}

// Info is a task as observers see it.
type Info struct {
	ID        string
	Type      TaskType
	Priority  Priority
	Effective Priority // after a starvation bump
	Template  string
	State     TaskState
	Reason    string
	Submitted time.Time
	Started   time.Time
	Finished  time.Time
	Pauses    int
}
