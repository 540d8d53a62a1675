// Package policyverbs does what the `fluffy policy` verbs (and `fluffy
// init`'s write preview) do with the policy engine, the trust pins of
// policy/pin and the project's audit log: load the active policy, explain
// a request, prepare and apply a reviewed update with its trial run, trust
// a project's file, and record both in the audit log. The CLI parses the
// arguments, asks the person and renders what these return.
//
// It must not print, prompt or parse command lines, and must not decide
// policy itself (the engine in policy does). The audit log is opened only
// when no kernel holds it; a running kernel records what it applies.
package policyverbs
