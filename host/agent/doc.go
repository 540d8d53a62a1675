// Package agent owns the AI loop of one session: it builds each model
// request (system prompt with the workflow state, writable paths and tool
// summaries; schemas through function calling), streams the provider's turn
// out as events, runs the requested tool calls through the router (in
// parallel where their paths do not overlap), feeds the results back, and
// repeats until the task is done, the user cancels, or a limit stops it.
//
// It owns the conversation and its context window (sliding window with a
// summary fallback at 70 % of the history budget, pinned items, token
// counts calibrated against the provider's reported usage), the task's
// limits (turns, tokens, cost, wall clock), futility detection
// (the same call with the same result again, turns without progress, the
// same test failure three times) and the ordered event stream.
//
// It must not bypass the router (every tool call goes through Tools.Call,
// which is the router), judge policy or workflow itself, or touch plugins,
// the project or the changeset directly.
package agent
