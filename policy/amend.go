package policy

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/lib/yamlpos"
)

// CodeAmend is the code of the errors Amend returns: the request cannot be
// approved "always" by a policy change (the error says why).
const CodeAmend = "POLICY_AMEND_UNSUPPORTED"

// Exemption is one request a person approved with the scope "always", and
// the require_review rules (policy file rules) that sent it to review.
type Exemption struct {
	Request Request
	Rules   []string
	// AnyArguments marks a request whose syscall alone names what was
	// approved: one tool of one MCP server, whatever its arguments. It
	// lets a request without a path be exempted by its syscall and caller;
	// without it such a request cannot be named exactly and is refused.
	AnyArguments bool
}

// AmendItem is one thing an Amendment adds, in its canonical YAML form.
type AmendItem struct {
	// Rule is the rule the item changes (Except) or adds (NewRule).
	Rule    string
	NewRule bool
	// Line is the line of Rule in the old file (0 for a new rule).
	Line int
	// Text is the YAML added: an except item, or the whole new rule.
	Text string
}

// Amendment is the policy change that makes "always" true: the new file
// content and what it adds.
type Amendment struct {
	Content []byte
	Items   []AmendItem
	// Diff lists the inserted lines ("+" lines, each run headed by its line
	// in the new file); an amendment only ever inserts.
	Diff string
}

// String renders the items as a person reads them.
func (a *Amendment) String() string {
	var b strings.Builder
	for _, it := range a.Items {
		if it.NewRule {
			fmt.Fprintf(&b, "new rule %s:\n", it.Rule)
		} else {
			fmt.Fprintf(&b, "rule %s (line %d) gains the exception:\n", it.Rule, it.Line)
			b.WriteString("  except:\n")
		}
		for _, l := range strings.Split(strings.TrimRight(it.Text, "\n"), "\n") {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}

// Amend computes the change to p's file that stops each exemption's exact
// request from being reviewed again, and nothing more. Because
// require_review beats allow, an allow rule alone would not do: each
// require_review rule that decided gains an except item matching exactly
// this syscall, this path (an anchored, escaped path_glob) and this caller
// plugin; when nothing else allows the request then (the review was the
// only way in), a new allow rule with the same match is added, so the
// request is allowed instead of falling to the default deny. The file is
// edited by inserting lines, so its comments, order and layout stay; the
// result is checked to mean exactly the old document plus these items, and
// to allow every exempted request.
func Amend(p *Policy, ex []Exemption) (*Amendment, error) {
	if len(ex) == 0 {
		return nil, amendErr("nothing to amend", "no request was given", "")
	}
	content := append([]byte(nil), p.Content...)
	var items []AmendItem
	for _, e := range ex {
		req := e.Request
		if !exactlyNamed(e) {
			return nil, amendErr(fmt.Sprintf("%s cannot be approved \"always\"", req.Syscall),
				"the policy can name a request exactly only by its file path, and this one has none (or it is the whole project)",
				"approve it once or for this session")
		}
		if len(e.Rules) == 0 {
			return nil, amendErr("no rule to narrow", "the request was not sent to review by a rule of the policy file", "approve it once or for this session")
		}
		for _, name := range e.Rules {
			r := ruleNamed(p, name)
			if r == nil || r.Action != RequireReview {
				return nil, amendErr(fmt.Sprintf("rule %q is not a require_review rule of %s", name, p.File),
					"only a policy file's own require_review rules can be narrowed", "approve it once or for this session")
			}
			item := exceptItem(req)
			text, err := flowText(item)
			if err != nil {
				return nil, err
			}
			if content, err = insertExcept(content, name, text); err != nil {
				return nil, err
			}
			items = append(items, AmendItem{Rule: name, Line: r.Line, Text: "- " + text})
		}
		// Nothing else allows it: the review was the only way in.
		np, err := Load(p.File, content)
		if err != nil {
			return nil, amendErr("the amended policy does not load", uerr.From(err).What, "approve it once or for this session")
		}
		if res := NewEngine(np, Options{}).Evaluate(context.Background(), req); res.Decision == Deny && res.DecidingRule() == "default-deny" {
			name := uniqueRuleName(np, allowRuleName(req))
			text, err := allowRuleText(name, req)
			if err != nil {
				return nil, err
			}
			if content, err = insertRule(content, e.Rules[0], text); err != nil {
				return nil, err
			}
			items = append(items, AmendItem{Rule: name, NewRule: true, Text: text})
		}
	}
	if err := sameBut(p.Content, content, items); err != nil {
		return nil, err
	}
	np, err := Load(p.File, content)
	if err != nil {
		return nil, amendErr("the amended policy does not load", uerr.From(err).What, "approve it once or for this session")
	}
	eng := NewEngine(np, Options{})
	for _, e := range ex {
		if res := eng.Evaluate(context.Background(), e.Request); res.Decision != Allow {
			return nil, amendErr(fmt.Sprintf("the amended policy still decides %s for %s", res.Decision, e.Request.String()),
				strings.Join(res.Reasons, "; "), "approve it once or for this session")
		}
	}
	return &Amendment{Content: content, Items: items, Diff: insertedLines(p.Content, content)}, nil
}

func amendErr(what, why, fix string) error { return uerr.New(CodeAmend, what, why, fix) }

func ruleNamed(p *Policy, name string) *Rule {
	for _, r := range p.Rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// exactGlob is the path_glob pattern that matches path and nothing else
// beside it: anchored at the project root, wildcards escaped.
func exactGlob(path string) string {
	var b strings.Builder
	b.WriteByte('/')
	for _, c := range path {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// exactlyNamed reports whether a policy item can match e's request and
// nothing beside it: by its path (a confined path below the project root),
// or, for a request without one that AnyArguments marks, by its syscall
// when that names one syscall and no pattern (a rule's syscall match
// treats "*" as a wildcard).
func exactlyNamed(e Exemption) bool {
	if p := e.Request.Path; p != "" {
		return confine.Check(p) == "" && !confine.IsRoot(p)
	}
	s := e.Request.Syscall
	return e.AnyArguments && s != "" && !strings.Contains(s, "*")
}

// exceptItem is the canonical match of exactly req: its syscall, its path
// (when it has one: see Exemption.AnyArguments) and who asked (the plugin,
// else the caller kind).
func exceptItem(req Request) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	add := func(k string, v *yaml.Node) {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
	}
	add("syscall", &yaml.Node{Kind: yaml.ScalarNode, Value: req.Syscall})
	if req.Path != "" {
		add("path_glob", &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle,
			Content: []*yaml.Node{{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: exactGlob(req.Path)}}})
	}
	if req.Caller.Plugin != "" {
		add("plugin", &yaml.Node{Kind: yaml.ScalarNode, Value: req.Caller.Plugin})
	} else if req.Caller.Kind != "" {
		add("caller_kind", &yaml.Node{Kind: yaml.ScalarNode, Value: req.Caller.Kind})
	}
	return m
}

func flowText(n *yaml.Node) (string, error) {
	b, err := yaml.Marshal(n)
	if err != nil {
		return "", fmt.Errorf("encode policy item: %w", err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

func allowRuleName(req Request) string {
	var b strings.Builder
	b.WriteString("always-")
	for _, c := range strings.ToLower(req.Syscall + "-" + req.Path) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			if s := b.String(); !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	s := strings.TrimSuffix(b.String(), "-")
	if len(s) > 60 {
		s = strings.TrimSuffix(s[:60], "-")
	}
	return s
}

func uniqueRuleName(p *Policy, base string) string {
	name := base
	for i := 2; ruleNamed(p, name) != nil; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name
}

// allowRuleText is the new allow rule for exactly req, as a block list item.
func allowRuleText(name string, req Request) (string, error) {
	match, err := flowText(exceptItem(req))
	if err != nil {
		return "", err
	}
	who := req.Caller.Plugin
	if who == "" {
		who = req.Caller.Kind
	}
	what := req.Syscall + " of " + req.Path
	if req.Path == "" {
		what = req.Syscall + " (any arguments)"
	}
	reason, err := flowText(&yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle,
		Value: fmt.Sprintf("approved with \"always\" in a review: %s by %s", what, who)})
	if err != nil {
		return "", err
	}
	lines := []string{"- name: " + name, "  match: " + match, "  action: allow", "  reason: " + reason}
	if req.Sandbox != "" {
		lines = append(lines, "  constraints: { require_sandbox: L2 }")
	}
	return strings.Join(lines, "\n"), nil
}

// insertion is lines inserted after line After (1-based) of a file.
type insertion struct {
	After int
	Lines []string
}

// insertedLines shows the lines newContent inserts into oldContent (an
// amendment only inserts), each run headed by its line in the new file.
func insertedLines(oldContent, newContent []byte) string {
	ol, nl := strings.Split(string(oldContent), "\n"), strings.Split(string(newContent), "\n")
	var b strings.Builder
	j := 0
	run := false
	for i := 0; i < len(nl); i++ {
		if j < len(ol) && nl[i] == ol[j] {
			j++
			run = false
			continue
		}
		if !run {
			fmt.Fprintf(&b, "@@ +%d @@\n", i+1)
			run = true
		}
		b.WriteString("+" + nl[i] + "\n")
	}
	return b.String()
}

// ruleNode finds the capabilities list and the rule called name in doc.
func ruleNode(doc *yaml.Node, name string) (caps, rule *yaml.Node) {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "capabilities" || top.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		caps = top.Content[i+1]
		for _, rn := range caps.Content {
			if v := yamlpos.Value(rn, "name"); v != nil && v.Value == name {
				return caps, rn
			}
		}
	}
	return caps, nil
}

// lastLine is the last line n's text occupies (its deepest, latest node,
// plus the lines of a multi-line scalar).
func lastLine(n *yaml.Node) int {
	last := n.Line + strings.Count(strings.TrimRight(n.Value, "\n"), "\n")
	if n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		last++
	}
	for _, c := range n.Content {
		if l := lastLine(c); l > last {
			last = l
		}
	}
	return last
}

func parseDoc(content []byte) (*yaml.Node, []string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(content, &doc); err != nil {
		return nil, nil, amendErr("the policy file is not valid YAML", err.Error(), "fix it with `fluffy policy validate`")
	}
	return &doc, strings.Split(string(content), "\n"), nil
}

// indentOf is the leading blanks of line (1-based) when it is a block list
// item ("- ..."), else ok is false.
func indentOf(lines []string, line int) (string, bool) {
	if line < 1 || line > len(lines) {
		return "", false
	}
	l := lines[line-1]
	t := strings.TrimLeft(l, " ")
	return l[:len(l)-len(t)], strings.HasPrefix(t, "- ")
}

func insertLines(lines []string, after int, add []string) []byte {
	out := make([]string, 0, len(lines)+len(add))
	out = append(out, lines[:after]...)
	out = append(out, add...)
	out = append(out, lines[after:]...)
	return []byte(strings.Join(out, "\n"))
}

var errLayout = func(rule, why string) error {
	return amendErr(fmt.Sprintf("rule %q cannot be amended in place", rule), why,
		"write the rule in block style (one key per line; except as a list of - items), or edit the file with `fluffy policy update`")
}

// insertExcept adds "- text" to rule's except list (creating the list).
func insertExcept(content []byte, rule, text string) ([]byte, error) {
	doc, lines, err := parseDoc(content)
	if err != nil {
		return nil, err
	}
	_, rn := ruleNode(doc, rule)
	if rn == nil || rn.Kind != yaml.MappingNode || rn.Style&yaml.FlowStyle != 0 || len(rn.Content) == 0 {
		return nil, errLayout(rule, "it is not a block mapping")
	}
	var ins insertion
	if ex := yamlpos.Value(rn, "except"); ex != nil {
		if ex.Kind != yaml.SequenceNode || ex.Style&yaml.FlowStyle != 0 || len(ex.Content) == 0 {
			return nil, errLayout(rule, "its except is not a block list")
		}
		ind, ok := indentOf(lines, ex.Content[0].Line)
		if !ok {
			return nil, errLayout(rule, "its except items do not start lines")
		}
		ins = insertion{After: lastLine(ex), Lines: []string{ind + "- " + text}}
	} else {
		key := strings.Repeat(" ", rn.Content[0].Column-1)
		ins = insertion{After: lastLine(rn), Lines: []string{key + "except:", key + "  - " + text}}
	}
	if ins.After > len(lines) {
		return nil, errLayout(rule, "its end could not be found")
	}
	return insertLines(lines, ins.After, ins.Lines), nil
}

// insertRule adds the rule text (a "- name: ..." item) after rule after.
func insertRule(content []byte, after, text string) ([]byte, error) {
	doc, lines, err := parseDoc(content)
	if err != nil {
		return nil, err
	}
	_, rn := ruleNode(doc, after)
	if rn == nil {
		return nil, errLayout(after, "it was not found")
	}
	ind, ok := indentOf(lines, rn.Line)
	if !ok {
		return nil, errLayout(after, "its item does not start a line")
	}
	add := []string{""}
	for _, l := range strings.Split(text, "\n") {
		add = append(add, ind+l)
	}
	ins := insertion{After: lastLine(rn), Lines: add}
	if ins.After > len(lines) {
		return nil, errLayout(after, "its end could not be found")
	}
	return insertLines(lines, ins.After, ins.Lines), nil
}

// sameBut checks that newContent means exactly oldContent plus items: the
// line edits did not land anywhere else (a layout the insertion misread).
func sameBut(oldContent, newContent []byte, items []AmendItem) error {
	var want, got map[string]any
	if err := yaml.Unmarshal(oldContent, &want); err != nil {
		return amendErr("the policy file is not valid YAML", err.Error(), "fix it with `fluffy policy validate`")
	}
	if err := yaml.Unmarshal(newContent, &got); err != nil {
		return amendErr("the amended policy is not valid YAML", err.Error(), "edit the file with `fluffy policy update`")
	}
	caps, _ := want["capabilities"].([]any)
	for _, it := range items {
		var v any
		if err := yaml.Unmarshal([]byte(it.Text), &v); err != nil {
			return amendErr("an amendment item is not valid YAML", err.Error(), "")
		}
		list, _ := v.([]any)
		if len(list) != 1 {
			return amendErr("an amendment item is not one list item", it.Text, "")
		}
		if it.NewRule {
			caps = append(caps, list[0])
			continue
		}
		for _, c := range caps {
			if m, ok := c.(map[string]any); ok && m["name"] == it.Rule {
				ex, _ := m["except"].([]any)
				m["except"] = append(ex, list[0])
			}
		}
	}
	want["capabilities"] = caps
	// A new rule's position in the list does not matter (rules are sorted
	// at load); compare the rules by name.
	if !reflect.DeepEqual(byName(want), byName(got)) {
		return amendErr("the policy file's layout defeated an in-place amendment",
			"inserting the lines would change more than the proposed items", "edit the file with `fluffy policy update`")
	}
	return nil
}

func byName(doc map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range doc {
		out[k] = v
	}
	caps, _ := doc["capabilities"].([]any)
	rules := make([]any, len(caps))
	copy(rules, caps)
	sort.SliceStable(rules, func(i, j int) bool {
		a, _ := rules[i].(map[string]any)
		b, _ := rules[j].(map[string]any)
		return fmt.Sprint(a["name"]) < fmt.Sprint(b["name"])
	})
	out["capabilities"] = rules
	return out
}
