// Package tool owns the tool-kind contract: the Go types of a tool call,
// the interface a tool plugin implements, and the go-plugin shims for API
// v1 (unary Execute) and v2 (streamed progress and explicit cancellation).
// Both shims give the kernel the same Client interface; which one it gets
// is decided by go-plugin's version negotiation.
//
// It must not import host/.
package tool
