// Package testbin is the one way tests (and the benchmark harness) build Go
// main packages: fixture plugins, builtin plugins, helper servers, the suite
// runner. Each build is static (CGO_ENABLED=0), so the binary also starts
// in the empty L2 image, and happens once per process for a given package,
// directory and flags, however many tests and goroutines ask for it.
//
// It owns the `go build` of test binaries and nothing else: it does not lay
// out plugin directories, stamp manifests or start processes. It imports
// only the standard library, so the plugin author's test kit may link it.
//
// TestOnlyOneGoBuild keeps it the only place in the tree that runs
// `go build`, apart from the few places where the go command itself is
// what is under test.
package testbin
