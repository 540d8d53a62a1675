// Package daemon owns the kernel process: one per project, reached by the
// CLI over host/ipc at a socket derived from the project path. It holds the
// project's kernel lock, serves the kernel's IPC methods, and exits when it
// has been idle (no client, no running work) for its idle timeout.
//
// It must not implement what the methods do (tasks belong to host/agent,
// plugins to host/kernel) and must not start containers itself: the
// bootstrap in cmd/fluffy decides where the daemon runs (L1 or a local
// process).
package daemon
