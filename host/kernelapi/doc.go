// Package kernelapi is the kernel process's one entry point and the server
// of its IPC methods: Serve builds the kernel (host/kernel) from parsed
// options, opens its task runner, and registers every method the CLI calls
// on a host/daemon.Daemon as a method of Service. It also owns the
// provider settings the CLI and the kernel both resolve (API key, model,
// replay cassette), the audit reads a CLI answers from the running
// kernel or, when none runs, from the database opened read-only, and the
// kernels a CLI command opens in its own process (OpenLocal: one tool
// call, an MCP server's tools; OpenRegistry: the home's plugin registry).
//
// It is its own package, not part of host/daemon, so that the daemon stays
// the transport and lifecycle of a kernel process (lock, socket, idle
// exit, dispatch) with no dependency on the kernel's tree, and is tested
// without one. kernelapi decides what each method does with the kernel's
// parts; it must not parse command lines, print for a person, or hold
// logic that belongs to the parts themselves (tasks to host/agent and
// host/kernel, changes to host/workspace, modes to host/state).
package kernelapi
