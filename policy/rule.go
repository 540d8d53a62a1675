package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/glob"
	"github.com/fluffy-waffle/fluffy/lib/units"
	"github.com/fluffy-waffle/fluffy/policy/testpaths"
)

// strField is one list-valued condition: unset matches anything, a set but
// empty list matches nothing, otherwise any value matches (OR).
type strField struct {
	set  bool
	vals []string
}

func (f strField) has(v string) bool {
	for _, x := range f.vals {
		if x == v {
			return true
		}
	}
	return false
}

func (f strField) match(v string) bool { return !f.set || f.has(v) }

func (f strField) matchAny(vs []string) bool {
	if !f.set {
		return true
	}
	for _, v := range vs {
		if f.has(v) {
			return true
		}
	}
	return false
}

// cond is a match or except clause: every set field must hold (AND).
type cond struct {
	line         int
	syscall      strField // exact, "prefix.*" or "*"
	paths        *glob.Set
	class        strField       // path_class: "test" and/or "source"
	tests        *testpaths.Set // the policy's test paths, for class
	hosts        strField       // exact or "*.domain"
	callerKind   strField
	callerTag    strField
	plugin       strField
	pluginKind   strField
	state        strField
	mode         strField
	hostDeclared *bool
}

func syscallMatch(pattern, s string) bool {
	if pattern == "*" || pattern == s {
		return true
	}
	return strings.HasSuffix(pattern, ".*") && strings.HasPrefix(s, pattern[:len(pattern)-1])
}

func hostMatch(pattern, host string) bool {
	if pattern == host {
		return true
	}
	return strings.HasPrefix(pattern, "*.") && strings.HasSuffix(host, pattern[1:])
}

func (c *cond) matches(p *prepared) bool {
	if c.syscall.set {
		ok := false
		for _, s := range c.syscall.vals {
			if syscallMatch(s, p.req.Syscall) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if c.paths != nil && (!p.pathOK || !p.matchSet(c.paths)) {
		return false
	}
	if c.class.set && (!p.pathOK || p.root || !c.class.has(pathClass(c.tests.Match(p.path)))) {
		return false
	}
	if c.hosts.set {
		ok := false
		for _, h := range c.hosts.vals {
			if p.host != "" && hostMatch(h, p.host) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if c.hostDeclared != nil && p.hostDeclared() != *c.hostDeclared {
		return false
	}
	caller := &p.req.Caller
	return c.callerKind.match(caller.Kind) && c.callerTag.matchAny(caller.Tags) &&
		c.plugin.match(caller.Plugin) && c.pluginKind.match(caller.PluginKind) &&
		c.state.match(p.req.State) && c.mode.match(p.req.SessionMode)
}

// Path classes of the path_class condition: what testpaths says a path is.
const (
	PathClassTest   = "test"
	PathClassSource = "source"
)

func pathClass(test bool) string {
	if test {
		return PathClassTest
	}
	return PathClassSource
}

// constraints qualify an allow: when one does not hold, the rule denies
// with the constraint as reason (an allow is never silently widened).
type constraints struct {
	requireSandbox string // "L2" = any sandbox, else a template name
	requireToken   bool
	maxFileSize    int64 // -1 = none
	maxDuration    time.Duration
	hasMaxDuration bool
	tokenTTL       time.Duration // for tokens issued under this rule
	tokenMaxOps    int
}

func (c *constraints) any() bool {
	return c.requireSandbox != "" || c.requireToken || c.maxFileSize >= 0 || c.hasMaxDuration || c.tokenTTL > 0 || c.tokenMaxOps > 0
}

func (c *constraints) check(r *Request) (string, bool) {
	switch {
	case c.requireSandbox == "L2" && r.Sandbox == "":
		return "must run in an L2 sandbox (require_sandbox: L2)", false
	case c.requireSandbox != "" && c.requireSandbox != "L2" && r.Sandbox != c.requireSandbox:
		return fmt.Sprintf("must run in the %s sandbox (require_sandbox), not %q", c.requireSandbox, r.Sandbox), false
	case c.requireToken && !r.ForToken:
		return "needs a capability token (require_capability_token); request one from the kernel", false
	case c.maxFileSize >= 0 && r.Size > c.maxFileSize:
		return fmt.Sprintf("size %d bytes exceeds max_file_size %s", r.Size, units.FormatSize(c.maxFileSize)), false
	case c.hasMaxDuration && r.Duration > c.maxDuration:
		return fmt.Sprintf("duration %v exceeds max_duration %v", r.Duration, c.maxDuration), false
	}
	return "", true
}

// Rule is one compiled YAML capability rule.
type Rule struct {
	Name   string
	Action Action
	Reason string
	File   string
	Line   int

	match       cond
	except      []cond
	constraints constraints
	source      string // file:line, computed at load
	reasonStr   string // Reason or a generated one, computed at load
}

// Source is "file:line".
func (r *Rule) Source() string { return r.source }

func (r *Rule) finalize() {
	r.source = fmt.Sprintf("%s:%d", r.File, r.Line)
	r.reasonStr = r.Reason
	if r.reasonStr == "" {
		r.reasonStr = fmt.Sprintf("rule %q: %s", r.Name, r.Action)
	}
}

func (r *Rule) reasonText() string { return r.reasonStr }

// applies reports whether the rule fires (match holds and no except does),
// with a note saying which except stopped it.
func (r *Rule) applies(p *prepared) (bool, string) {
	if !r.match.matches(p) {
		return false, ""
	}
	for i := range r.except {
		if r.except[i].matches(p) {
			return false, fmt.Sprintf("except #%d (line %d) matched", i+1, r.except[i].line)
		}
	}
	return true, ""
}

// eval returns the rule's verdict for p.
func (r *Rule) eval(p *prepared) RuleEval {
	ok, note := r.applies(p)
	ev := RuleEval{Rule: r.Name, Layer: LayerYAML, Source: r.source, Note: note}
	if !ok {
		return ev
	}
	ev.Matched, ev.Action, ev.Reason = true, r.Action, r.reasonText()
	if r.Action == Allow {
		if why, ok := r.constraints.check(p.req); !ok {
			ev.Action = Deny
			ev.Reason = fmt.Sprintf("rule %q allows this only when constraints hold: %s", r.Name, why)
			ev.Note = "constraint violated"
		}
	}
	return ev
}

// prepared is a request with its path split and validated once.
type prepared struct {
	req      *Request
	inFluffy bool // the path's first segment is .fluffy, in any case
	path     glob.Path
	pathOK   bool   // a valid path is present
	root     bool   // the path is the project root itself (".", "./")
	badWhy   string // why the path is invalid ("" when fine or absent)
	host     string
}

func prepare(r *Request) prepared { return prepareBuf(r, nil) }

// prepareBuf is prepare storing the path's segments in buf (see
// glob.ParsePathBuf): the engine passes a stack array so that evaluating a
// request does not allocate.
func prepareBuf(r *Request, buf []string) prepared {
	p := prepared{req: r}
	if r.Host != "" {
		p.host = strings.TrimSuffix(strings.ToLower(r.Host), ".")
	}
	if r.Path == "" {
		return p
	}
	// One lexical rule for every project path (confine.Check): relative,
	// no NUL or backslash, no "..", not empty. The root itself (".", "./")
	// is a valid path of its own: listing or searching the whole project
	// is judged on it, and only "**" patterns match it.
	switch p.badWhy = confine.Check(r.Path); {
	case p.badWhy == "":
		p.path = glob.ParsePathBuf(buf, r.Path)
	case confine.IsRoot(r.Path):
		p.badWhy, p.root = "", true
	}
	p.pathOK = p.badWhy == ""
	p.inFluffy = p.pathOK && strings.EqualFold(p.path.First(), confine.KernelDir)
	return p
}

// matchSet matches the prepared path against a glob set.
func (p *prepared) matchSet(s *glob.Set) bool {
	if p.root {
		return s.MatchRoot()
	}
	return s.Match(p.path)
}

func (p *prepared) hostDeclared() bool {
	if p.host == "" {
		return false
	}
	for _, h := range p.req.Caller.Hosts {
		if hostMatch(strings.TrimSuffix(strings.ToLower(h), "."), p.host) {
			return true
		}
	}
	return false
}
