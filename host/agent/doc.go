// Package agent owns the AI loop: context window, streaming, tool calls, budgets. It must not bypass the router.
package agent
