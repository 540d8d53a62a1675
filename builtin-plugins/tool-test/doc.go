// Command tool-test is the builtin test-runner plugin: `test.run` runs the
// project's tests on the session's read-only view (/workspace) and returns
// a plugins/tool/testrun.Run — a classification (red, green, no_tests,
// build_error, timeout, runner_error) the workflow machine trusts, per-test
// outcomes, build errors with file:line, counts and optional coverage (go and
// node; the other runners say it is not measured).
//
// Runners: Go (`go test -json`, its build events included), pytest (junit
// XML), node (`node --test` with the junit reporter), cargo (rustc's JSON
// diagnostics, then each test binary's libtest JSON report). The runner is
// detected from the view or named by the call; classification reads only
// the runners' machine formats, never free text (pytest's exit code only
// cross-checks its report).
//
// Code the AI wrote never runs with write access to anything that outlives
// the call: the Go toolchain builds with the kernel-owned cache (/cache),
// over the host's Go build cache mounted read-only at /hostcache/go-build
// (this binary's `__fluffy_gocacheprog` mode serves both to the go command
// as its GOCACHEPROG until the project's cache holds what a run took from
// the host), but every test binary, and pytest, node and cargo themselves, start through
// this binary's `confine` mode, which restricts writes with Landlock to a
// per-run scratch directory before exec'ing them.
//
// It owns running and classifying; it must not write the project (the view
// is read-only), propose file changes, or judge what a run means for the
// workflow (the kernel's job). The full log goes to /out/<operation>/.
package main
