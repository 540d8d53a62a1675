// Package e2e runs fluffy the way a newcomer does: the binaries `make build`
// put under bin/, a fresh $FLUFFY_HOME, and projects laid out as their
// communities lay them out (a Go module with its code at the root, a Python
// package with pytest, a Node package with `node --test`, a Rust crate),
// each changed test-first to a merged commit under the default policy.
//
// It owns only its tests and the projects and cassettes they write; it must
// not import the kernel's packages to drive a task: every step goes through
// the fluffy command line as printed by README and --help.
package e2e
