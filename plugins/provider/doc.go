// Package provider owns the AI-provider contract: a streamed chat turn
// with text deltas, tool-call deltas, usage and a final stop reason, and
// its go-plugin shim. One proto serves plugin API v1 and v2.
//
// Provider plugins reach their upstream API only through the kernel's
// CONNECT proxy; nothing here opens a network connection. It must not
// import host/.
package provider
