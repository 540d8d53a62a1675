// Package router owns one tool call, from the name and arguments a user or
// model gave to the result they get back. Every tool call of the kernel goes
// through Router.Call — `fluffy plugin call` today, the agent loop later —
// in this order, each step audited:
//
//	lookup → schema → state gate → policy (require_review → approver)
//	       → dispatch (through the scheduler) → output limit → ingest
//	       → sanitize → audit → result
//
// The stages that belong to other modules are consumer interfaces declared
// here (Catalog, Dispatcher, Gate, Approver, Scheduler, Ingester) with safe
// defaults when absent: no gate means no workflow restriction, no approver
// means a call that needs review is refused, no scheduler means the call
// runs at once, no ingester means proposed changes stay in the call's output
// directory.
//
// Before lookup it repairs what models get wrong in a call (host/toolcall:
// a tool name spelled another way that means exactly one tool, arguments
// wrapped in a JSON string or a markdown fence) and audits the repair. A
// tool that declares write paths may propose changes only to the paths
// judged for the call.
//
// It owns: argument validation against the tool's manifest schema, the
// policy requests a call makes (one per declared path argument, plus one for
// the tool itself), the kernel's output size limit, redaction of outputs
// (lib/redact plus the policy's `sanitize` patterns), and the audit
// events tool_execute, syscall, tool_review and tool_result.
//
// It must not own plugin processes (host/supervisor does), decide policy
// (policy/ does), or write the project (host/workspace and host/merge do).
package router
