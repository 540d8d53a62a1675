package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/glob"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/lib/units"
	"github.com/fluffy-waffle/fluffy/lib/yamlpos"
	"github.com/fluffy-waffle/fluffy/policy/testpaths"
)

// Error codes of the loader; callers and tests branch on them.
const (
	CodeSyntax        = "POLICY_SYNTAX"
	CodeUnknownField  = "POLICY_UNKNOWN_FIELD"
	CodeBadValue      = "POLICY_BAD_VALUE"
	CodeBadUnit       = "POLICY_BAD_UNIT"
	CodeBadGlob       = "POLICY_BAD_GLOB"
	CodeDuplicateRule = "POLICY_DUPLICATE_RULE"
	CodeExampleFailed = "POLICY_EXAMPLE_FAILED"
	CodeRead          = "POLICY_READ"
)

// Warning codes: the policy loads, but a rule can never fire or a setting
// has no effect.
const (
	WarnEmptyList         = "POLICY_EMPTY_LIST"
	WarnNeverFires        = "POLICY_RULE_NEVER_FIRES"
	WarnConstraintIgnored = "POLICY_CONSTRAINT_IGNORED"
)

// Warning is a schema warning with its location.
type Warning struct {
	Code    string
	File    string
	Line    int
	Rule    string
	Message string
}

func (w Warning) String() string {
	return fmt.Sprintf("%s:%d: rule %q: %s (%s)", w.File, w.Line, w.Rule, w.Message, w.Code)
}

// Mode is enforce (default) or observe.
type Mode uint8

const (
	Enforce Mode = iota
	Observe
)

func (m Mode) String() string {
	if m == Observe {
		return "observe"
	}
	return "enforce"
}

// Policy is a loaded, validated policy. It is immutable once loaded.
type Policy struct {
	File       string // name used in messages
	Mode       Mode
	Rules      []*Rule // canonical order: by syscall bucket, deny first, then name
	Extensions []string
	// Network is the network_whitelist section (Set false when absent).
	Network NetworkWhitelist
	// Sanitize are the user's secret patterns for tool output (section
	// `sanitize`).
	Sanitize []SanitizePattern
	// Tests says which paths are test files: the test_paths section on top
	// of the per-language defaults. The path_class condition and the
	// workflow machine both classify through it. Never nil once loaded.
	Tests *testpaths.Set
	// Sections holds the other top-level sections (tdd_exemptions,
	// toolchains, ...) for the modules that own them.
	Sections map[string]*yaml.Node
	Content  []byte
	Hash     string // sha256 of Content
	Warnings []Warning
	// Unapproved is set on the embedded default when it applies in place
	// of a project policy file the user has not approved (policy/pin).
	Unapproved *Unapproved

	index    ruleIndex
	examples []Request
}

// ExampleRequests returns every example and counter-example of the
// policy's rules, in file order (a trial set when no audit log exists).
func (p *Policy) ExampleRequests() []Request { return append([]Request(nil), p.examples...) }

// Section returns a top-level section owned by another module.
func (p *Policy) Section(name string) (*yaml.Node, bool) {
	n, ok := p.Sections[name]
	return n, ok
}

// ruleIndex maps a syscall type to the rules that can match it (a
// map from syscall type to rules). Rules with a wildcard or no syscall are
// merged into every exact list they can match, and kept in wild for
// syscalls no rule names exactly.
type ruleIndex struct {
	exact map[string][]*Rule
	wild  []*Rule
}

func (ix *ruleIndex) lookup(syscall string) []*Rule {
	if l, ok := ix.exact[syscall]; ok {
		return l
	}
	return ix.wild
}

// otherSections are top-level sections other modules own; they are kept
// as YAML nodes. Anything else at the top level is an error.
var otherSections = []string{"network_whitelist", "tdd_exemptions", "tech_debt", "audit", "toolchains"}

var (
	syscallRe      = regexp.MustCompile(`^(\*|[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*(\.\*)?)$`)
	nameRe         = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	enumCallerKind = []string{"user", "kernel", "plugin"}
	enumPluginKind = []string{"tool", "provider", "runtime", "vcs", "policy"}
	enumMode       = []string{"strict", "explore", "debug"}
	enumPathClass  = []string{PathClassTest, PathClassSource}
	enumState      = []string{"idle", "planning", "test_writing", "code_writing", "validating", "reviewing", "committing", "exploring", "retroactive_testing"}
)

// LoadFile reads and loads a policy file.
func LoadFile(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, uerr.Wrap(err, CodeRead, "cannot read policy file "+path, err.Error(),
			"check the path and its permissions")
	}
	return Load(path, data)
}

// Load parses and validates a policy. name is used in every message. A
// policy whose examples fail, or with any bad unit, glob or field, does not
// load; rules that can never fire load with Warnings.
func Load(name string, data []byte) (*Policy, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, uerr.Wrap(err, CodeSyntax, fmt.Sprintf("%s: not valid YAML", name), err.Error(),
			"fix the YAML syntax at the line given")
	}
	sum := sha256.Sum256(data)
	p := &Policy{File: name, Content: append([]byte(nil), data...), Hash: hex.EncodeToString(sum[:]), Sections: map[string]*yaml.Node{},
		Tests: testpaths.MustDefault()}
	l := &loader{file: name, p: p}
	if len(doc.Content) == 0 {
		p.index = buildIndex(nil)
		return p, nil // an empty file: only built-in rules (case 19)
	}
	if err := l.top(doc.Content[0]); err != nil {
		return nil, err
	}
	sortRules(p.Rules)
	p.index = buildIndex(p.Rules)
	return p, nil
}

type loader struct {
	file string
	p    *Policy
}

func (l *loader) err(code string, n *yaml.Node, what, why, fix string) *uerr.Error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return uerr.New(code, fmt.Sprintf("%s:%d: %s", l.file, line, what), why, fix).WithContext("%s:%d", l.file, line)
}

func (l *loader) warn(code string, n *yaml.Node, rule, msg string) {
	l.p.Warnings = append(l.p.Warnings, Warning{Code: code, File: l.file, Line: n.Line, Rule: rule, Message: msg})
}

// mapping walks a mapping node, rejecting duplicate and unknown keys.
func (l *loader) mapping(n *yaml.Node, what string, known []string, f func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return l.err(CodeBadValue, n, what+" must be a mapping", fmt.Sprintf("found a %s", yamlpos.Kind(n)), "write key: value pairs")
	}
	seen := yamlpos.Seen{}
	return yamlpos.Pairs(n, "", func(p yamlpos.Pair) error {
		k, v := p.Key, p.Value
		if _, dup := seen.Repeat(k); dup {
			return l.err(CodeBadValue, k, fmt.Sprintf("duplicate key %q in %s", k.Value, what), "a key may appear once", "merge the two entries")
		}
		if known != nil && !slices.Contains(known, k.Value) {
			return l.err(CodeUnknownField, k, fmt.Sprintf("unknown field %q in %s", k.Value, what),
				"fluffy does not guess what a misspelled field means", "use one of: "+strings.Join(known, ", "))
		}
		return f(k.Value, k, v)
	})
}

func (l *loader) scalar(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", l.err(CodeBadValue, n, what+" must be a single value", "found a "+yamlpos.Kind(n), "write a plain value")
	}
	return n.Value, nil
}

func (l *loader) boolean(n *yaml.Node, what string) (bool, error) {
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, l.err(CodeBadValue, n, what+" must be true or false", fmt.Sprintf("found %q", n.Value), "write true or false")
}

// list accepts a single value or a list of values.
func (l *loader) list(n *yaml.Node, what string) ([]string, error) {
	if n.Kind == yaml.ScalarNode {
		if n.Tag == "!!null" {
			return nil, l.err(CodeBadValue, n, what+" is empty", "a null value is ambiguous", "write [] for an empty list or remove the field")
		}
		return []string{n.Value}, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, l.err(CodeBadValue, n, what+" must be a value or a list", "found a "+yamlpos.Kind(n), "write a value or [a, b]")
	}
	out := make([]string, 0, len(n.Content))
	for _, c := range n.Content {
		s, err := l.scalar(c, what+" entry")
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (l *loader) top(n *yaml.Node) error {
	known := append([]string{"version", "mode", "capabilities", "extensions", "sanitize", testpaths.Section}, otherSections...)
	var capNode *yaml.Node
	err := l.mapping(n, "the policy file", known, func(key string, k, v *yaml.Node) error {
		switch key {
		case "version":
			if v.Value != "1" {
				return l.err(CodeBadValue, v, fmt.Sprintf("unsupported policy version %q", v.Value), "this fluffy reads version 1", "write version: 1")
			}
		case "mode":
			switch v.Value {
			case "enforce":
				l.p.Mode = Enforce
			case "observe":
				l.p.Mode = Observe
			default:
				return l.err(CodeBadValue, v, fmt.Sprintf("unknown mode %q", v.Value), "mode decides whether denies are enforced", "write mode: enforce or mode: observe")
			}
		case "capabilities":
			capNode = v
		case "extensions":
			xs, err := l.list(v, "extensions")
			if err != nil {
				return err
			}
			l.p.Extensions = xs
		case "sanitize":
			return l.sanitize(v)
		case SectionNetworkWhitelist:
			return l.networkWhitelist(v)
		case testpaths.Section:
			// Parsed before the rules (they come after this loop), whose
			// examples may depend on it through path_class.
			set, err := testpaths.FromYAML(l.file, v)
			if err != nil {
				return err
			}
			l.p.Tests = set
		default:
			l.p.Sections[key] = v
		}
		return nil
	})
	if err != nil {
		return err
	}
	if capNode == nil || (capNode.Kind == yaml.ScalarNode && capNode.Tag == "!!null") {
		return nil
	}
	if capNode.Kind != yaml.SequenceNode {
		return l.err(CodeBadValue, capNode, "capabilities must be a list of rules", "found a "+yamlpos.Kind(capNode), "write each rule as a list item starting with '- name:'")
	}
	names := map[string]int{}
	for _, rn := range capNode.Content {
		r, err := l.rule(rn)
		if err != nil {
			return err
		}
		if first, dup := names[r.Name]; dup {
			return l.err(CodeDuplicateRule, rn, fmt.Sprintf("rule name %q is used twice", r.Name),
				fmt.Sprintf("it was first defined at line %d; names identify rules in audit records and explain output", first), "rename one of them")
		}
		names[r.Name] = r.Line
		l.p.Rules = append(l.p.Rules, r)
	}
	return nil
}

var ruleFields = []string{"name", "description", "match", "action", "reason", "constraints", "except", "examples", "counter_examples"}

func (l *loader) rule(n *yaml.Node) (*Rule, error) {
	r := &Rule{File: l.file, Line: n.Line, constraints: constraints{maxFileSize: -1}}
	var matchN, actionN, consN, exceptN, exN, cexN *yaml.Node
	err := l.mapping(n, "a rule", ruleFields, func(key string, k, v *yaml.Node) error {
		switch key {
		case "name":
			s, err := l.scalar(v, "name")
			if err != nil {
				return err
			}
			if !nameRe.MatchString(s) {
				return l.err(CodeBadValue, v, fmt.Sprintf("bad rule name %q", s), "names are letters, digits and _ . : -", "rename the rule")
			}
			r.Name = s
		case "description":
		case "match":
			matchN = v
		case "action":
			actionN = v
		case "reason":
			s, err := l.scalar(v, "reason")
			if err != nil {
				return err
			}
			r.Reason = s
		case "constraints":
			consN = v
		case "except":
			exceptN = v
		case "examples":
			exN = v
		case "counter_examples":
			cexN = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r.Name == "" {
		return nil, l.err(CodeBadValue, n, "rule without a name", "every rule needs a unique name", "add name: ...")
	}
	if actionN == nil {
		return nil, l.err(CodeBadValue, n, fmt.Sprintf("rule %q has no action", r.Name), "a rule must say what it decides", "add action: allow, deny, require_review or pass")
	}
	a, ok := ParseAction(actionN.Value)
	if !ok || actionN.Kind != yaml.ScalarNode {
		return nil, l.err(CodeBadValue, actionN, fmt.Sprintf("rule %q: unknown action %q", r.Name, actionN.Value), "actions are case-sensitive", "use allow, deny, require_review or pass")
	}
	r.Action = a
	if matchN == nil {
		return nil, l.err(CodeBadValue, n, fmt.Sprintf("rule %q has no match", r.Name), "a rule without match would apply to every syscall", `add match: { syscall: "..." }`)
	}
	if r.match, err = l.cond(matchN, r.Name, "match"); err != nil {
		return nil, err
	}
	if exceptN != nil {
		if exceptN.Kind != yaml.SequenceNode {
			return nil, l.err(CodeBadValue, exceptN, fmt.Sprintf("rule %q: except must be a list", r.Name), "found a "+yamlpos.Kind(exceptN), "write except: [ { path_glob: [...] } ]")
		}
		for _, en := range exceptN.Content {
			c, err := l.cond(en, r.Name, "except")
			if err != nil {
				return nil, err
			}
			r.except = append(r.except, c)
			if implies(&r.match, &c) {
				l.warn(WarnNeverFires, en, r.Name, "this except item holds whenever match holds, so the rule never fires")
			}
		}
	}
	if consN != nil {
		if err := l.constraints(consN, r); err != nil {
			return nil, err
		}
		if r.Action != Allow && r.constraints.any() {
			l.warn(WarnConstraintIgnored, consN, r.Name, "constraints only qualify allow rules; they have no effect on "+r.Action.String())
		}
	}
	r.finalize()
	if err := l.examples(exN, r, true); err != nil {
		return nil, err
	}
	if err := l.examples(cexN, r, false); err != nil {
		return nil, err
	}
	return r, nil
}

var condFields = []string{"syscall", "path_glob", "path_class", "host", "host_declared", "caller_kind", "caller_tag", "plugin", "plugin_kind", "state_machine_state", "session_mode"}

func (l *loader) cond(n *yaml.Node, rule, where string) (cond, error) {
	c := cond{line: n.Line}
	what := fmt.Sprintf("rule %q %s", rule, where)
	strList := func(v *yaml.Node, key string, enum []string, re *regexp.Regexp) (strField, error) {
		vals, err := l.list(v, what+" "+key)
		if err != nil {
			return strField{}, err
		}
		for _, s := range vals {
			if enum != nil && !slices.Contains(enum, s) {
				return strField{}, l.err(CodeBadValue, v, fmt.Sprintf("%s: unknown %s %q", what, key, s),
					"a misspelled value would make the rule silently never match", "use one of: "+strings.Join(enum, ", "))
			}
			if re != nil && !re.MatchString(s) {
				return strField{}, l.err(CodeBadValue, v, fmt.Sprintf("%s: bad %s %q", what, key, s),
					"syscalls are dotted lower-case names, optionally ending in .* (or * alone)", `write e.g. "fs.write" or "fs.*"`)
			}
			if s == "" {
				return strField{}, l.err(CodeBadValue, v, fmt.Sprintf("%s: empty %s value", what, key), "an empty value matches nothing", "remove it")
			}
		}
		if len(vals) == 0 {
			l.warn(WarnEmptyList, v, rule, fmt.Sprintf("%s %s is an empty list and matches nothing", where, key))
		}
		return strField{set: true, vals: vals}, nil
	}
	err := l.mapping(n, what, condFields, func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "syscall":
			c.syscall, err = strList(v, key, nil, syscallRe)
		case "path_glob":
			var pats []string
			if pats, err = l.list(v, what+" path_glob"); err != nil {
				return err
			}
			set, gerr := glob.CompileSet(pats)
			if gerr != nil {
				return l.err(CodeBadGlob, v, fmt.Sprintf("%s: %v", what, gerr), "path_glob uses .gitignore pattern syntax", "fix the pattern (see docs: ** any depth, leading / anchors, trailing / directories, !pattern excludes)")
			}
			c.paths = set
			switch {
			case len(pats) == 0:
				l.warn(WarnEmptyList, v, rule, where+" path_glob is an empty list and matches no paths")
			case !set.HasInclude():
				l.warn(WarnEmptyList, v, rule, where+" path_glob has only excludes (!pattern) and matches no paths")
			}
		case "path_class":
			c.class, err = strList(v, key, enumPathClass, nil)
			c.tests = l.p.Tests
		case "host":
			c.hosts, err = strList(v, key, nil, nil)
			for i, h := range c.hosts.vals {
				c.hosts.vals[i] = strings.TrimSuffix(strings.ToLower(h), ".")
			}
		case "host_declared":
			b, berr := l.boolean(v, what+" host_declared")
			if berr != nil {
				return berr
			}
			c.hostDeclared = &b
		case "caller_kind":
			c.callerKind, err = strList(v, key, enumCallerKind, nil)
		case "caller_tag":
			c.callerTag, err = strList(v, key, nil, nil)
		case "plugin":
			c.plugin, err = strList(v, key, nil, nil)
		case "plugin_kind":
			c.pluginKind, err = strList(v, key, enumPluginKind, nil)
		case "state_machine_state":
			c.state, err = strList(v, key, enumState, nil)
		case "session_mode":
			c.mode, err = strList(v, key, enumMode, nil)
		}
		return err
	})
	if err != nil {
		return c, err
	}
	if where == "except" && c.empty() {
		l.warn(WarnNeverFires, n, rule, "an empty except item matches everything, so the rule never fires")
	}
	return c, nil
}

func (c *cond) empty() bool {
	return !c.syscall.set && c.paths == nil && !c.class.set && !c.hosts.set && c.hostDeclared == nil && !c.callerKind.set &&
		!c.callerTag.set && !c.plugin.set && !c.pluginKind.set && !c.state.set && !c.mode.set
}

// implies reports whether except item e holds for every request match m
// holds for (so the rule never fires): every field e sets, m sets to a
// subset of e's values.
func implies(m, e *cond) bool {
	sub := func(mf, ef strField) bool {
		if !ef.set {
			return true
		}
		if !mf.set {
			return false
		}
		for _, v := range mf.vals {
			if !ef.has(v) {
				return false
			}
		}
		return true
	}
	if e.syscall.set {
		if !m.syscall.set {
			return false
		}
		for _, v := range m.syscall.vals {
			ok := false
			for _, ev := range e.syscall.vals {
				if syscallMatch(ev, v) && (!strings.Contains(v, "*") || ev == v || ev == "*") {
					ok = true
				}
			}
			if !ok {
				return false
			}
		}
	}
	if e.paths != nil {
		if m.paths == nil {
			return false
		}
		for _, p := range m.paths.Patterns() {
			if !strings.HasPrefix(p, "!") && !slices.Contains(e.paths.Patterns(), p) {
				return false
			}
		}
		for _, p := range e.paths.Patterns() {
			if strings.HasPrefix(p, "!") && !slices.Contains(m.paths.Patterns(), p) {
				return false
			}
		}
	}
	if e.hostDeclared != nil && (m.hostDeclared == nil || *m.hostDeclared != *e.hostDeclared) {
		return false
	}
	return sub(m.class, e.class) && sub(m.hosts, e.hosts) && sub(m.callerKind, e.callerKind) && sub(m.callerTag, e.callerTag) &&
		sub(m.plugin, e.plugin) && sub(m.pluginKind, e.pluginKind) && sub(m.state, e.state) && sub(m.mode, e.mode)
}

var constraintFields = []string{"require_sandbox", "require_capability_token", "max_file_size", "max_duration", "token_ttl", "token_max_ops"}

func (l *loader) constraints(n *yaml.Node, r *Rule) error {
	c := &r.constraints
	what := fmt.Sprintf("rule %q constraints", r.Name)
	return l.mapping(n, what, constraintFields, func(key string, k, v *yaml.Node) error {
		s, err := l.scalar(v, what+" "+key)
		if err != nil {
			return err
		}
		switch key {
		case "require_sandbox":
			ok := s == "L2" || slices.Contains([]string{"ai-provider", "code-executor", "policy-sandbox", "integration-test"}, s)
			if !ok {
				return l.err(CodeBadValue, v, fmt.Sprintf("%s: unknown sandbox %q", what, s), "require_sandbox names L2 (any sandbox) or a sandbox template", "use L2, ai-provider, code-executor, policy-sandbox or integration-test")
			}
			c.requireSandbox = s
		case "require_capability_token":
			b, err := l.boolean(v, what+" require_capability_token")
			if err != nil {
				return err
			}
			c.requireToken = b
		case "max_file_size":
			sz, err := units.ParseSize(s)
			if err != nil {
				return l.unitErr(v, what+" max_file_size", s, err, units.SizeHelp)
			}
			c.maxFileSize = sz
		case "max_duration", "token_ttl":
			d, err := units.ParseDuration(s)
			if err != nil {
				return l.unitErr(v, what+" "+key, s, err, units.DurationHelp)
			}
			if key == "token_ttl" {
				c.tokenTTL = d
			} else {
				c.maxDuration, c.hasMaxDuration = d, true
			}
		case "token_max_ops":
			var n int
			if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != s {
				return l.err(CodeBadValue, v, fmt.Sprintf("%s: token_max_ops %q is not a positive whole number", what, s), "it is a count of operations", "write e.g. token_max_ops: 10")
			}
			c.tokenMaxOps = n
		}
		return nil
	})
}

func (l *loader) unitErr(v *yaml.Node, what, val string, err error, help string) error {
	var ue *units.Error
	why := err.Error()
	if errors.As(err, &ue) {
		why = ue.Why
	}
	e := l.err(CodeBadUnit, v, fmt.Sprintf("%s: bad value %q", what, val), why+"; units are case-sensitive and never guessed", "write "+help)
	e.Err = err
	return e
}

var exampleFields = []string{"syscall", "path", "host", "size", "duration", "sandbox", "caller_kind", "caller_tag", "plugin", "plugin_kind", "instance", "declared_hosts", "session_mode", "state_machine_state", "for_token"}

// examples checks a rule's examples (must fire) or counter_examples (must
// not) at load time.
func (l *loader) examples(n *yaml.Node, r *Rule, want bool) error {
	if n == nil {
		return nil
	}
	field := "examples"
	if !want {
		field = "counter_examples"
	}
	if n.Kind != yaml.SequenceNode {
		return l.err(CodeBadValue, n, fmt.Sprintf("rule %q: %s must be a list", r.Name, field), "found a "+yamlpos.Kind(n), "write a list of syscalls, each a mapping")
	}
	for _, en := range n.Content {
		req, err := l.exampleRequest(en, fmt.Sprintf("rule %q %s item", r.Name, field))
		if err != nil {
			return err
		}
		l.p.examples = append(l.p.examples, req)
		p := prepare(&req)
		got, note := r.applies(&p)
		if got != want {
			why := "the rule does not match it"
			if want && note != "" {
				why = "the rule's " + note
			}
			if !want {
				why = "the rule matches it"
			}
			return l.err(CodeExampleFailed, en, fmt.Sprintf("rule %q: %s item %s fails", r.Name, field, req.String()), why,
				"fix the rule's match/except, or the example if the rule is right")
		}
	}
	return nil
}

// ExampleRequest parses the YAML form of a request (the examples syntax);
// the CLI and tests use it too.
func (l *loader) exampleRequest(n *yaml.Node, what string) (Request, error) {
	var req Request
	err := l.mapping(n, what, exampleFields, func(key string, k, v *yaml.Node) error {
		if key == "caller_tag" || key == "declared_hosts" {
			vals, err := l.list(v, what+" "+key)
			if key == "caller_tag" {
				req.Caller.Tags = vals
			} else {
				req.Caller.Hosts = vals
			}
			return err
		}
		s, err := l.scalar(v, what+" "+key)
		if err != nil {
			return err
		}
		switch key {
		case "syscall":
			req.Syscall = s
		case "path":
			req.Path = s
		case "host":
			req.Host = s
		case "size":
			sz, err := units.ParseSize(s)
			if err != nil {
				return l.unitErr(v, what+" size", s, err, units.SizeHelp)
			}
			req.Size = sz
		case "duration":
			d, err := units.ParseDuration(s)
			if err != nil {
				return l.unitErr(v, what+" duration", s, err, units.DurationHelp)
			}
			req.Duration = d
		case "sandbox":
			req.Sandbox = s
		case "caller_kind":
			req.Caller.Kind = s
		case "plugin":
			req.Caller.Plugin = s
			if req.Caller.Kind == "" {
				req.Caller.Kind = "plugin"
			}
		case "plugin_kind":
			req.Caller.PluginKind = s
		case "instance":
			req.Caller.Instance = s
		case "session_mode":
			req.SessionMode = s
		case "state_machine_state":
			req.State = s
		case "for_token":
			b, err := l.boolean(v, what+" for_token")
			if err != nil {
				return err
			}
			req.ForToken = b
		}
		return nil
	})
	if err == nil && req.Syscall == "" {
		err = l.err(CodeBadValue, n, what+" has no syscall", "an example is a syscall", "add syscall: ...")
	}
	return req, err
}

// actionRank puts deny first within a bucket: it short-circuits earliest.
func actionRank(a Action) int {
	return [...]int{Deny: 0, RequireReview: 1, Allow: 2, Pass: 3}[a]
}

func sortRules(rs []*Rule) {
	sort.SliceStable(rs, func(i, j int) bool {
		if ri, rj := actionRank(rs[i].Action), actionRank(rs[j].Action); ri != rj {
			return ri < rj
		}
		return rs[i].Name < rs[j].Name
	})
}

func buildIndex(rules []*Rule) ruleIndex {
	ix := ruleIndex{exact: map[string][]*Rule{}}
	var wild []*Rule
	exactNames := map[string]bool{}
	for _, r := range rules {
		if !r.match.syscall.set {
			wild = append(wild, r)
			continue
		}
		isWild := false
		for _, s := range r.match.syscall.vals {
			if strings.Contains(s, "*") {
				isWild = true
			} else {
				exactNames[s] = true
			}
		}
		if isWild {
			wild = append(wild, r)
		}
	}
	for s := range exactNames {
		var l []*Rule
		for _, r := range rules {
			if !r.match.syscall.set {
				l = append(l, r)
				continue
			}
			for _, pat := range r.match.syscall.vals {
				if syscallMatch(pat, s) {
					l = append(l, r)
					break
				}
			}
		}
		ix.exact[s] = l
	}
	ix.wild = wild
	return ix
}
