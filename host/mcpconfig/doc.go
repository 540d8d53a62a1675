// Package mcpconfig owns the list of configured MCP servers (`fluffy mcp
// add|list|remove`): one file per user and one per project, both under
// $FLUFFY_HOME, never in the project tree, so a cloned repository cannot
// bring a server that starts a program. It validates what a server entry
// may say and builds the bridge's Configure JSON.
//
// It must not start servers or decide what their tools may do: the kernel
// runs each server through the supervisor, and the policy judges calls.
package mcpconfig
