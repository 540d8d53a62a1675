// Command fluffy is the one binary: CLI, REPL, bootstrap, `fluffy kernel`,
// `fluffy conformance`.
//
// It owns argument parsing and rendering only. Every decision (policy, audit,
// plugin lifecycle) belongs to host/ and the packages it wires; a subcommand
// here parses flags, calls into them, and prints.
package main
