// Package provider owns the AI-provider contract: one streamed model turn
// in (ChatRequest), normalized events out (text, reasoning, tool-call
// start/delta/end with the complete arguments, usage, done or a structured
// error with retry information), the models a provider serves with their
// capabilities, and the go-plugin shims for API v1 and v2.
//
// It also owns the rules every provider shares: how tool names travel on
// the wire (ToolNames), how a plugin builds a well-formed event sequence
// (Stream), and how the kernel checks and assembles one (Turn).
//
// Provider plugins reach their upstream API only through the kernel's
// CONNECT proxy; nothing here opens a network connection. It must not
// import host/.
package provider
