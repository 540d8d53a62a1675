// Package task owns the task runner of one session: the agent's loop over
// the session's provider, the workflow machine, the router's tool calls
// with their reviews (and the "always" amendment of the policy file), the
// merge and commit at the end, the recovery of an interrupted commit and
// the recording of provider turns. It must not wire the kernel, load or
// start plugins, or own the policy, audit log, workspace or router it is
// handed: the kernel builds it with Open and the dependencies in Deps.
package task
