// Command fluffy is the one binary: CLI, REPL, bootstrap, `fluffy kernel`,
// `fluffy conformance`.
//
// It owns argument parsing and rendering only. Every decision (policy, audit,
// plugin lifecycle) belongs to host/ and the packages it wires; a subcommand
// here parses flags, calls into them, and prints. Every command is defined
// once in the tree of commands.go (the cmd type and the dispatcher are in
// cmdtree.go); its help, the completion and docs/cli.md are printed from it.
package main
