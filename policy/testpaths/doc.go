// Package testpaths is fluffy's one definition of "which files are tests":
// per-language gitignore globs (Go, pytest, Jest/Vitest/node, Rust, plus
// plain test/ directories) that a project's policy may override in its
// test_paths section. The policy engine's path_class condition and the
// workflow machine's gate both classify paths through a Set from here, so
// they can never disagree.
package testpaths
