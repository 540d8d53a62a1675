package state

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/glob"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Error codes of the gate.
const (
	CodeToolUnavailable = "TOOL_UNAVAILABLE"
	CodeReviewRequired  = "STATE_REVIEW_REQUIRED"
)

// Tools the machine knows by name. Every other tool is judged by whether
// the call writes (and where) or only reads.
const (
	ToolPlanComplete     = "plan.complete"
	ToolRequestExemption = "workflow.request_exemption"
	ToolSetMode          = "session.set_mode"
	ToolTestRun          = "test.run"
	ToolShellExec        = "shell.exec"
	ToolContainerRun     = "container.run"
)

// ToolInfo describes a tool for the list of available tools: its name and
// whether it writes to the project.
type ToolInfo struct {
	Name   string
	Writes bool
}

// builtinCatalog is the list used when no catalog is given: the fs and
// search tools of the builtin plugins, test.run, the debug tools and the
// kernel tools.
var builtinCatalog = []ToolInfo{
	{"fs.read", false}, {"fs.list", false}, {"fs.exists", false}, {"fs.stat", false},
	{"search.grep", false}, {"search.glob", false},
	{"fs.write", true}, {"fs.edit", true}, {"fs.apply_patch", true}, {"fs.delete", true}, {"fs.rename", true},
	{ToolTestRun, false}, {ToolShellExec, false}, {ToolContainerRun, false},
	{ToolPlanComplete, false}, {ToolRequestExemption, false}, {ToolSetMode, false},
}

// Exemption is a granted TDD exemption: for the current task, the listed
// paths (and only they) are writable in exploring, without consuming the
// tech-debt budget.
type Exemption struct {
	Category  ExemptionCategory `json:"category"`
	Paths     []string          `json:"paths"`
	Reason    string            `json:"reason"`
	GrantedAt time.Time         `json:"granted_at"`
}

// Position is where a session is: what the gate judges.
type Position struct {
	State State
	Mode  Mode
	// Exemption is the current task's granted exemption, if any.
	Exemption *Exemption
}

// Flow is the table the position follows.
func (p Position) Flow() Flow {
	if p.Mode == Strict && p.Exemption == nil {
		return FlowStrict
	}
	return FlowExplore
}

// ToolUnavailableError says the tool cannot
// be used in the current state. It marshals to the shape clients parse.
type ToolUnavailableError struct {
	Kind      string   `json:"error"` // always "tool_unavailable"
	Tool      string   `json:"tool_name"`
	State     State    `json:"current_state"`
	Mode      Mode     `json:"session_mode"`
	Path      string   `json:"path,omitempty"`
	Reason    string   `json:"reason"`
	Fix       string   `json:"fix,omitempty"`
	Available []string `json:"available_tools"`
}

func (e *ToolUnavailableError) Error() string {
	var b strings.Builder
	b.WriteString("tool_unavailable: ")
	b.WriteString(e.Tool)
	if e.Path != "" {
		b.WriteString(" ")
		b.WriteString(e.Path)
	}
	fmt.Fprintf(&b, " in %s (%s mode): %s", e.State, e.Mode, e.Reason)
	return b.String()
}

// Unwrap gives the structured user error, so uerr.HasCode(err,
// CodeToolUnavailable) holds.
func (e *ToolUnavailableError) Unwrap() error {
	what := fmt.Sprintf("%s is not available in %s", e.Tool, e.State)
	if e.Path != "" {
		what = fmt.Sprintf("%s of %s is not allowed in %s", e.Tool, e.Path, e.State)
	}
	return uerr.New(CodeToolUnavailable, what, e.Reason, e.Fix)
}

// ReviewRequiredError: the tool is available, but only after a human
// approves this call (debug mode's shell.exec and container.run). A caller
// that treats every non-nil answer of the gate as a refusal fails safe.
type ReviewRequiredError struct {
	Tool   string
	State  State
	Mode   Mode
	Reason string
}

func (e *ReviewRequiredError) Error() string {
	return fmt.Sprintf("review required: %s in %s (%s mode): %s", e.Tool, e.State, e.Mode, e.Reason)
}

// Review names the state, mode and reason as plain strings, so a caller
// can recognise a review (errors.As with its own interface) without
// importing this package.
func (e *ReviewRequiredError) Review() (state, mode, reason string) {
	return string(e.State), string(e.Mode), e.Reason
}

// Unwrap gives the structured user error.
func (e *ReviewRequiredError) Unwrap() error {
	return uerr.New(CodeReviewRequired, e.Tool+" needs a human review in debug mode", e.Reason, "approve or reject the call")
}

// Allowed is the pure gate: may tool run at position p, touching path
// (project-relative, slash-separated; "" when the call names no path), and
// does it write? It returns nil, a *ToolUnavailableError, or a
// *ReviewRequiredError. It reads nothing but its arguments and r, and does
// not allocate unless it refuses.
func (r *Rules) Allowed(p Position, tool, path string, write bool) error {
	reason, fix, review := r.judge(p, tool, path, write)
	if review != "" {
		return &ReviewRequiredError{Tool: tool, State: p.State, Mode: p.Mode, Reason: review}
	}
	if reason == "" {
		return nil
	}
	return &ToolUnavailableError{Kind: "tool_unavailable", Tool: tool, State: p.State, Mode: p.Mode, Path: pathIfWrite(path, write),
		Reason: reason, Fix: fix, Available: r.available(p)}
}

func pathIfWrite(path string, write bool) string {
	if write {
		return path
	}
	return ""
}

// judge returns a refusal reason (and fix), a review reason, or nothing.
func (r *Rules) judge(p Position, tool, path string, write bool) (reason, fix, review string) {
	if reason, fix, review = r.judgeTool(p, tool); reason != "" || review != "" || !write {
		return reason, fix, review
	}
	return r.judgeWrite(p, path)
}

func (r *Rules) judgeTool(p Position, tool string) (reason, fix, review string) {
	switch tool {
	case ToolSetMode:
		return "", "", "" // judged by SetMode itself (policy, review, state)
	}
	if p.State == Idle {
		return "no task is in progress (the session is idle)", "send a message to start a task", ""
	}
	switch tool {
	case ToolPlanComplete:
		if p.State != Planning {
			return "plan.complete ends planning; the session is past it", "", ""
		}
	case ToolRequestExemption:
		if p.Mode != Strict || p.Exemption != nil || (p.State != Planning && p.State != TestWriting) {
			return "exemptions are requested in strict mode while planning or writing tests, once per task", "", ""
		}
	case ToolTestRun:
		switch p.State {
		case Reviewing, Committing:
			return "tests do not run while the change is " + string(p.State), "wait until review and commit are done", ""
		}
	case ToolShellExec, ToolContainerRun:
		if p.Mode != Debug {
			return tool + " is only available in debug mode", "switch to debug mode with session.set_mode (it needs a review)", ""
		}
		switch p.State {
		case Planning, Exploring, RetroactiveTesting:
			return "", "", "debug mode runs " + tool + " only after a human approves each call"
		}
		return tool + " runs only while planning or exploring", "", ""
	}
	return "", "", ""
}

// judgeWrite decides a write to path at p.
func (r *Rules) judgeWrite(p Position, path string) (reason, fix, review string) {
	if bad := badPath(path); bad != "" {
		return bad, "name one project-relative file", ""
	}
	var buf [24]string
	pth := glob.ParsePathBuf(buf[:0], path)
	switch p.State {
	case TestWriting:
		if r.tests.Match(pth) {
			return "", "", ""
		}
		switch r.classify(pth) {
		case ClassExempt:
			return "strict mode: only test files are writable until a test run on the current tree is red; " + path + " matches a TDD exemption category",
				"write a failing test first, or request an exemption with workflow.request_exemption", ""
		}
		return "strict mode: only test files are writable until a test run on the current tree is red (TDD red phase); " + path + " is a source file",
			"write a test that fails (test paths: " + r.testPathList() + ") and run test.run", ""
	case CodeWriting:
		if r.tests.Match(pth) {
			return "test files are read-only in code_writing: the red test defines the change; " + path + " is a test file",
				"change the code so the test passes; to change the test, cancel and start over", ""
		}
		return "", "", ""
	case Exploring:
		if p.Exemption == nil {
			return "", "", ""
		}
		if slices.Contains(p.Exemption.Paths, path) || slices.Contains(p.Exemption.Paths, pth.String()) {
			return "", "", ""
		}
		return "the " + string(p.Exemption.Category) + " exemption covers only " + strings.Join(p.Exemption.Paths, ", "),
			"cancel and request a new exemption, or follow the TDD flow", ""
	case RetroactiveTesting:
		if r.tests.Match(pth) {
			return "", "", ""
		}
		return "retroactive_testing: only test files are writable; " + path + " is not a test file",
			"write tests (test paths: " + r.testPathList() + "), then run test.run", ""
	case Planning:
		return "nothing is writable while planning", "call plan.complete with the plan first", ""
	case Validating:
		return "nothing is writable while the tests validate the change", "wait for the test run", ""
	case Reviewing:
		return "nothing is writable while the change is reviewed", "wait for the review; a rejection reopens writing", ""
	case Committing:
		return "nothing is writable while the change is committed", "", ""
	}
	return "nothing is writable in " + string(p.State), "", ""
}

// badPath rejects what is not a clean project-relative path. Confinement is
// the router's job; this only keeps the classification honest.
func badPath(p string) string {
	if p == "" {
		return "a write must name the path it writes"
	}
	if p[0] == '/' || strings.IndexByte(p, 0) >= 0 || strings.IndexByte(p, '\\') >= 0 {
		return "not a clean project-relative path"
	}
	if strings.Contains(p, "..") {
		for s := range strings.SplitSeq(p, "/") {
			if s == ".." {
				return "not a clean project-relative path"
			}
		}
	}
	if strings.HasSuffix(p, "/") {
		return "a write names a file, not a directory"
	}
	return ""
}

func (r *Rules) testPathList() string { return r.testList }

// available is Available for the builtin catalog, precomputed per position
// kind (a copy, so callers may keep or change it).
func (r *Rules) available(p Position) []string {
	return slices.Clone(r.avail[availKey(p)])
}

type posKey struct {
	state  State
	mode   Mode
	exempt bool
}

func availKey(p Position) posKey { return posKey{p.State, p.Mode, p.Exemption != nil} }

func (r *Rules) precompute() {
	r.testList = r.tests.String()
	r.avail = map[posKey][]string{}
	for _, st := range States {
		for _, md := range Modes {
			for _, ex := range []bool{false, true} {
				p := Position{State: st, Mode: md}
				if ex {
					p.Exemption = &Exemption{}
				}
				r.avail[availKey(p)] = r.Available(p, nil)
			}
		}
	}
}

// writable reports whether some path can be written at p.
func writable(p Position) bool {
	switch p.State {
	case TestWriting, CodeWriting, Exploring, RetroactiveTesting:
		return true
	}
	return false
}

// Available lists the tools of catalog (nil: fluffy's builtin tools) that
// can be used at p. Write tools are listed where some path is writable.
func (r *Rules) Available(p Position, catalog []ToolInfo) []string {
	if catalog == nil {
		catalog = builtinCatalog
	}
	out := make([]string, 0, len(catalog))
	for _, t := range catalog {
		if reason, _, _ := r.judgeTool(p, t.Name); reason != "" {
			continue
		}
		if t.Writes && !writable(p) {
			continue
		}
		out = append(out, t.Name)
	}
	return out
}

// Explanation answers "why can't I write X?".
type Explanation struct {
	Path     string   `json:"path"`
	Class    string   `json:"class"` // source, test, exempt
	Exempt   []string `json:"exempt_categories,omitempty"`
	State    State    `json:"state"`
	Mode     Mode     `json:"mode"`
	Writable bool     `json:"writable"`
	Reason   string   `json:"reason"`
	Fix      string   `json:"fix,omitempty"`
}

// Explain says whether path is writable at p and why.
func (r *Rules) Explain(p Position, path string) Explanation {
	e := Explanation{Path: path, State: p.State, Mode: p.Mode}
	if badPath(path) == "" {
		e.Class = r.Classify(path).String()
		for _, c := range r.exemptCategories(path) {
			e.Exempt = append(e.Exempt, string(c))
		}
	}
	reason, fix, _ := r.judge(p, "fs.write", path, true)
	e.Writable, e.Reason, e.Fix = reason == "", reason, fix
	if e.Writable {
		e.Reason = fmt.Sprintf("%s is a %s path and %s allows writing it in %s mode", path, e.Class, p.State, p.Mode)
		if p.Exemption != nil {
			e.Reason += " (" + string(p.Exemption.Category) + " exemption)"
		}
	}
	return e
}
