// Command tool-mcp is the bridge to one Model Context Protocol server. The
// kernel runs one instance per configured server (`fluffy mcp add`), each
// in its own L2 sandbox; the bridge starts the server's program as its
// child inside that sandbox (confined by Landlock to a scratch directory,
// with only the environment the configuration names), speaks MCP over the
// child's stdin/stdout with the official Go SDK, and offers the server's
// tools as mcp.SERVER.TOOL with the server's input schemas.
//
// It owns the MCP session with the child and the bounding of what comes
// back (line length, result size, non-text content); it must not decide
// whether a call may run (the router and the policy do) nor touch the
// project (it has the read-only view every tool has).
package main
