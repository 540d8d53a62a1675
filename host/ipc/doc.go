// Package ipc owns the CLI-to-kernel channel: the length-prefixed
// JSON frames (4-byte big-endian length, then one UTF-8 JSON message) over a
// unix socket, with the peer's identity checked by SO_PEERCRED before any
// frame is read.
//
// It owns framing, size limits, request/response correlation, event
// streaming and the peer check. It must not interpret requests: methods and
// their params belong to the kernel's handler, and nothing here knows what a
// task, a session or a tool is.
package ipc
