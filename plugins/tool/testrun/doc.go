// Package testrun is the contract of a structured test run: the JSON a
// test-runner tool (builtin-plugins/tool-test's `test.run`) returns as its
// Result.Output, and what the kernel's workflow machine (host/state) judges.
//
// It owns the types, the status vocabulary and the decoding/validation of a
// plugin's answer. It must not run tests, parse any runner's output, or know
// about the workflow states: producing a Run is the plugin's job, judging it
// is the kernel's.
package testrun
