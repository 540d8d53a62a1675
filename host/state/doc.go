// Package state owns the TDD workflow machine and the session store.
//
// The machine runs the two transition tables (strict, explore; debug
// mode follows explore) on github.com/looplab/fsm, one Machine per session,
// created by a Manager per project:
//
//   - guards (looplab before_event) judge only structured facts: the
//     testrun.Run the kernel stamped with the view it ran on, the merge
//     approval, the tech-debt budget; a run on an older tree is stale;
//   - every change of state or mode is a link of the session's own hash
//     chain in the project database (keys under store.PrefixState), written
//     before the state changes (looplab leave_state) together with a
//     durable audit record (state_transition, session_mode_change); a
//     change that cannot be recorded does not happen;
//   - the gate (Machine.Allowed, and Rules.Allowed as a pure function)
//     answers the router before every tool call with nil, a
//     *ToolUnavailableError (the fields) or a *ReviewRequiredError;
//   - which paths are tests is the policy's one table (Policy.Tests,
//     policy/testpaths: per-language defaults under test_paths), which
//     are exempt comes from tdd_exemptions, the budget from tech_debt and
//     .fluffy/coverage-baseline.json;
//   - the kernel tools plan.complete, workflow.request_exemption and
//     session.set_mode are served here (Manager.KernelTools);
//   - Manager.Open resumes a session after a kernel restart in the state,
//     mode and changeset it had (recovery step 3).
//
// It must not call plugins, run tests, parse a runner's output, decide
// policy (it asks the policy engine and the Approver) or touch the
// changeset: it consumes the View, the Auditor, the PolicyEvaluator and the
// Approver through interfaces declared here.
package state
