// Package policy owns the policy engine:
// the rule model, the YAML loader with strict units and load-time examples,
// evaluation in layers (built-in rules → capability-token fast path → YAML
// rules indexed by syscall → extension plugins), observe mode, hot reload,
// policy.update with a trial replay of recent decisions, and the default
// policy shipped with fluffy.
//
// Semantics: default-deny; a deny is terminal and short-circuits; a
// require_review beats allow and all review reasons are kept; pass abstains;
// the result never depends on rule order.
//
// It must not perform the actions it judges, talk to plugins directly (an
// Extension is handed in by the kernel), or write the audit log (callers
// record the Result it returns).
//
// Subpackages: glob (gitignore-style patterns), units (sizes, durations),
// token (capability tokens), pin (the user's approval of a project's policy
// file, without which the embedded default applies), testpaths (which files
// are tests: the test_paths section, read into Policy.Tests, which the
// path_class condition and the workflow gate both classify through).
package policy
