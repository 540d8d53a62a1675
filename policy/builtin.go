package policy

import (
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/confine"

	"github.com/fluffy-waffle/fluffy/lib/glob"
)

// MaxBuiltins is the bound on hard-coded rules.
const MaxBuiltins = 10

// builtinRule is a hard-coded protection. Built-in rules run first on
// every path, token or not, and cannot be changed by any policy file.
type builtinRule struct {
	name   string
	desc   string
	kind   builtinKind
	set    *glob.Set // kindProtect
	reason string    // kindProtect, kindFixed
	action Action    // kindFixed
}

type builtinKind uint8

const (
	kindConfinement builtinKind = iota
	kindKernelDir
	kindProtect
	kindPolicyUpdate
	kindFixed // tests only: a fixed verdict
)

// eval is a switch, not a func value: an indirect call would make every
// prepared request escape to the heap.
func (b *builtinRule) eval(p *prepared) (Action, string) {
	switch b.kind {
	case kindConfinement:
		if p.req.Path != "" && !p.pathOK {
			return Deny, "invalid path " + quote(p.req.Path) + ": " + p.badWhy
		}
	case kindKernelDir:
		if p.inFluffy && isPlugin(p.req.Caller) {
			return Deny, "the project's " + confine.KernelDir + " directory (policy, audit log, session data) belongs to the kernel; no plugin may read, list or change it"
		}
	case kindProtect:
		if !p.inFluffy || !mutatesFS(p.req.Syscall) {
			return Pass, ""
		}
		if b.set.Match(glob.ParsePath(strings.ToLower(p.path.String()))) {
			return Deny, b.reason
		}
	case kindPolicyUpdate:
		if p.req.Syscall != "policy.update" {
			return Pass, ""
		}
		if isPlugin(p.req.Caller) {
			return Deny, "only the user can change the policy; plugins may not request policy.update"
		}
		return RequireReview, "policy changes always need human review"
	case kindFixed:
		return b.action, b.reason
	}
	return Pass, ""
}

// isPlugin reports whether the caller is a plugin (or claims a plugin
// name, which only plugins' requests carry).
func isPlugin(c Caller) bool { return c.Kind == "plugin" || c.Plugin != "" }

// BuiltinInfo describes a built-in rule for `fluffy policy show`.
type BuiltinInfo struct{ Name, Description string }

// Builtins lists the built-in rules in evaluation order.
func Builtins() []BuiltinInfo {
	var out []BuiltinInfo
	for _, b := range builtinRules() {
		out = append(out, BuiltinInfo{b.name, b.desc})
	}
	return out
}

// readOnlyFS are the fs syscalls that do not change anything; every other
// fs.* syscall is treated as a mutation by the protections below.
var readOnlyFS = []string{"fs.read", "fs.list", "fs.exists", "fs.stat"}

func mutatesFS(syscall string) bool {
	if !strings.HasPrefix(syscall, "fs.") {
		return false
	}
	for _, s := range readOnlyFS {
		if s == syscall {
			return false
		}
	}
	return true
}

// protect builds a rule denying fs mutations of paths matched by globs.
// Matching is case-insensitive: on macOS and Windows ".FLUFFY/Policy.yaml"
// is the same file.
func protect(name, desc, reason string, patterns ...string) builtinRule {
	return builtinRule{name: name, desc: desc, kind: kindProtect, reason: reason, set: glob.MustCompileSet(patterns...)}
}

// builtinRules returns the hard-coded rules.
func builtinRules() []builtinRule {
	return []builtinRule{
		{name: "builtin.path-confinement", desc: "paths must be project-relative and stay inside the project", kind: kindConfinement},
		{name: "builtin.kernel-dir-private", desc: "plugins can neither read nor change anything in the project's .fluffy directory", kind: kindKernelDir},
		protect("builtin.policy-files", "policy files cannot be changed through fs.* (only policy.update)",
			"policy files can only be changed through `fluffy policy update` (policy.update), never fs.*",
			"/.fluffy/policy*.yaml", "/.fluffy/policy.d", "/.fluffy/.policy*"),
		{name: "builtin.policy-update-review", desc: "policy.update always needs human review, and plugins may never request it", kind: kindPolicyUpdate},
		protect("builtin.bootstrap-files", "bootstrap files of the project's fluffy directory are immutable to plugins",
			"bootstrap files are owned by the fluffy bootstrap, not by plugins",
			"/.fluffy/bootstrap", "/.fluffy/bootstrap*.yaml", "/.fluffy/config.yaml"),
		protect("builtin.kernel-files", "kernel runtime files (sockets, pid files, plugin store) are immutable to plugins",
			"kernel runtime files are owned by the kernel",
			"/.fluffy/kernel", "/.fluffy/run", "/.fluffy/*.sock", "/.fluffy/*.pid", "/.fluffy/plugins"),
		// host/store.DefaultDir: the audit log, sessions, the workflow
		// machine and the merge log all live in one badger directory; a
		// damaged one is kept beside it as db.corrupt-<time>. out/ is where
		// proposed changes lived before sessions moved them to $FLUFFY_HOME.
		// host/state keeps the tech-debt baseline beside it.
		protect("builtin.project-store", "the project database (audit log, sessions, workflow state, merge log) and the coverage baseline are written by the kernel alone",
			"the project database and the tech-debt baseline are written by the kernel alone",
			"/.fluffy/db", "/.fluffy/db.*", "/.fluffy/out", "/.fluffy/sessions", "/.fluffy/coverage-baseline.json"),
	}
}

func quote(s string) string { return "\"" + s + "\"" }
