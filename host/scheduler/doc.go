// Package scheduler owns the order in which a session's sandboxed work
// runs: tasks with a type, a priority 1–5 and
// a sandbox template; a min-heap per template (FIFO within a priority);
// the starvation bump (one level after AgeThreshold, never above 2,
// priority 1 immune); a dependency DAG with failure propagation
// ("dependency failed: A"); concurrency limits, global and per template;
// preemption (wait when the victim is almost done, destroy when memory is
// tight, otherwise pause with PAUSE_SIGNAL, a 1 s grace and the runtime
// adapter's pause, and resume later). It is event-driven: submissions,
// completions, cancellations, finished pauses and one timer for the
// earliest starvation deadline drive it; there is no polling loop.
//
// It must not know what a task does: a Task carries a Run function and,
// optionally, a Preemptible (Container adapts a runtime adapter's
// container). The workflow machine expresses test-first ordering as
// dependencies (host/state.Pipeline); the scheduler only respects them.
package scheduler
