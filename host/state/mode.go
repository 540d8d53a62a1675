package state

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

// Codes of mode changes and exemptions.
const (
	CodeModeRefused     = "STATE_MODE_REFUSED"
	CodeModeBusy        = "STATE_MODE_BUSY"
	CodeBadMode         = "STATE_BAD_MODE"
	CodeExemptionDenied = "STATE_EXEMPTION_DENIED"
)

// ModeRequest asks for a session mode (session.set_mode), from whatever
// source: a CLI flag, an environment variable, the REPL or the AI.
type ModeRequest struct {
	Mode   Mode
	Reason string
	// Caller is who asks, as the policy sees it: Kind "user" for the CLI
	// and the REPL; the AI's requests come from the router with the
	// caller it judges AI tool calls as.
	Caller policy.Caller
}

// ModeRefusedError: the change was refused and the session is in strict
// mode ("If policy denies, falls back to strict mode").
type ModeRefusedError struct {
	Requested Mode
	Now       Mode
	Reason    string
}

func (e *ModeRefusedError) Error() string {
	return fmt.Sprintf("mode %s refused (%s); the session is in %s mode", e.Requested, e.Reason, e.Now)
}

// Unwrap gives the structured user error.
func (e *ModeRefusedError) Unwrap() error {
	return uerr.New(CodeModeRefused, fmt.Sprintf("switching to %s mode was refused; the session runs in %s mode", e.Requested, e.Now), e.Reason,
		"change the policy (session.set_mode rules) or continue in strict mode")
}

// SetMode changes the session mode (session.set_mode). The change always
// goes through the policy; debug mode always needs a human review (the
// Approver), whatever the policy says; a locked tech-debt budget refuses
// explore and debug. A refused change leaves the session in strict mode.
// Modes change only between tasks or while planning, since the two flows
// share only those states. Asking for strict cannot be refused: strict is
// where a refusal leads anyway.
func (m *Machine) SetMode(ctx context.Context, req ModeRequest) (Mode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.snap.Mode
	if !req.Mode.Valid() {
		return cur, uerr.New(CodeBadMode, fmt.Sprintf("unknown session mode %q", req.Mode), "the modes are strict, explore and debug", "ask for one of them")
	}
	actor := actorOf(req.Caller)
	req.Reason = clip(req.Reason, maxReasonRunes)
	if req.Mode == cur {
		return cur, nil
	}
	if m.snap.State != Idle && m.snap.State != Planning {
		why := fmt.Sprintf("the session is in %s; the mode changes only between tasks or while planning", m.snap.State)
		m.auditModeRefusal(ctx, req, actor, why, "")
		return cur, uerr.New(CodeModeBusy, fmt.Sprintf("cannot switch to %s mode now", req.Mode), why, "finish or cancel the current task first")
	}
	if req.Mode == Strict {
		return Strict, m.changeMode(ctx, Strict, actor, audit.DecisionAllowed, req.Reason)
	}
	decision, rule, why := m.judgeMode(ctx, req)
	if decision != audit.DecisionAllowed {
		m.auditModeRefusal(ctx, req, actor, why, rule)
		if cur != Strict {
			if err := m.changeMode(ctx, Strict, "kernel", "fallback", "refused "+string(req.Mode)+": "+why); err != nil {
				return cur, err
			}
		}
		return Strict, &ModeRefusedError{Requested: req.Mode, Now: Strict, Reason: why}
	}
	return req.Mode, m.changeMode(ctx, req.Mode, actor, decision+ruleSuffix(rule), req.Reason)
}

func ruleSuffix(rule string) string {
	if rule == "" {
		return ""
	}
	return " (" + rule + ")"
}

func actorOf(c policy.Caller) string {
	switch {
	case c.Plugin != "":
		return c.Plugin
	case c.Kind != "":
		return c.Kind
	}
	return "kernel"
}

// judgeMode returns the decision (audit.DecisionAllowed or Denied), the
// deciding policy rule and the reason.
func (m *Machine) judgeMode(ctx context.Context, req ModeRequest) (decision, rule, why string) {
	if lock, err := m.mg.budget.Locked(); err != nil {
		return audit.DecisionDenied, "", "the tech-debt budget cannot be read: " + err.Error()
	} else if lock != nil {
		return audit.DecisionDenied, "", fmt.Sprintf("explore mode is locked by the tech-debt budget (coverage %.1f%% against a %.1f%% baseline); a strict commit that restores coverage unlocks it", lock.Coverage, lock.Baseline)
	}
	if m.mg.o.Policy == nil {
		return audit.DecisionDenied, "", "no policy is loaded to judge session.set_mode"
	}
	res := m.mg.o.Policy.Evaluate(ctx, policy.Request{Syscall: ToolSetMode, SessionMode: string(req.Mode), State: string(m.snap.State), Caller: req.Caller})
	rule = res.DecidingRule()
	reasons := strings.Join(res.Reasons, "; ")
	switch res.Enforced {
	case policy.Allow:
		if req.Mode != Debug {
			return audit.DecisionAllowed, rule, reasons
		}
	case policy.RequireReview:
	default:
		if reasons == "" {
			reasons = "the policy does not allow it"
		}
		return audit.DecisionDenied, rule, "policy: " + reasons
	}
	// Debug mode, or the policy asks for a review.
	if m.mg.o.Approver == nil {
		return audit.DecisionDenied, rule, "switching to " + string(req.Mode) + " mode needs a human review and no reviewer is available"
	}
	what := fmt.Sprintf("switch session %s to %s mode", m.id, req.Mode)
	reviewWhy := req.Reason
	if req.Mode == Debug {
		reviewWhy = strings.TrimSpace(reviewWhy + " (debug mode lets the AI run shell.exec and container.run, each after your review)")
	}
	ok, err := m.mg.o.Approver.Approve(ctx, ReviewRequest{SessionID: m.id, Kind: "session_mode", What: what, Why: reviewWhy})
	switch {
	case err != nil:
		return audit.DecisionDenied, rule, "the review failed: " + err.Error()
	case !ok:
		return audit.DecisionDenied, rule, "the reviewer refused"
	}
	return audit.DecisionAllowed, rule, "approved by review"
}

// changeMode persists a mode change with its durable session_mode_change
// audit record. Called with m.mu held, in idle or planning.
func (m *Machine) changeMode(ctx context.Context, to Mode, actor, decision, why string) error {
	from := m.snap.Mode
	next := m.snap
	next.Mode = to
	rec := record{Kind: kindMode, Snapshot: next, FromMode: from, From: m.snap.State, Actor: actor, Note: why}
	ev := audit.Event{Type: audit.EventSessionModeChange, SessionID: m.id, SessionMode: string(to), State: string(next.State),
		Caller: callerOf(actor), ToolName: ToolSetMode, PolicyDecision: audit.DecisionAllowed, Input: why,
		Metadata: map[string]string{"from_mode": string(from), "to_mode": string(to), "decision": decision}}
	if err := m.append(ctx, &rec, ev); err != nil {
		return err
	}
	m.setSnap(next)
	return nil
}

func (m *Machine) auditModeRefusal(ctx context.Context, req ModeRequest, actor, why, rule string) {
	_, err := m.mg.o.Audit.Append(context.WithoutCancel(ctx), audit.Event{Type: audit.EventSessionModeChange, SessionID: m.id, SessionMode: string(m.snap.Mode),
		State: string(m.snap.State), Caller: callerOf(actor), ToolName: ToolSetMode, PolicyDecision: audit.DecisionDenied, PolicyRule: rule,
		DenyReason: why, Input: req.Reason, Metadata: map[string]string{"from_mode": string(m.snap.Mode), "requested": string(req.Mode)}})
	if err != nil {
		m.mg.log.Error("cannot audit a refused mode change", "session", m.id, "error", err)
	}
}

// ExemptionRequest asks for a TDD exemption for a task.
type ExemptionRequest struct {
	Category      ExemptionCategory `json:"category"`
	AffectedPaths []string          `json:"affected_paths"`
	Reason        string            `json:"reason"`
}

// RequestExemption judges a TDD exemption (workflow.request_exemption):
// in strict mode, while planning or writing tests, for paths that all
// match the category's configured globs. A grant moves the task to
// exploring with only those paths writable and no tech-debt cost; every
// request, granted or not, is audited durably.
func (m *Machine) RequestExemption(ctx context.Context, req ExemptionRequest, actor string) (Exemption, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	req.Reason = clip(strings.TrimSpace(req.Reason), maxReasonRunes)
	paths, why, fix := m.judgeExemption(req)
	if why != "" {
		if err := m.auditExemption(ctx, req, actor, why); err != nil {
			m.mg.log.Error("cannot audit a refused exemption request", "session", m.id, "error", err)
		}
		return Exemption{}, uerr.New(CodeExemptionDenied, "TDD exemption "+string(req.Category)+" refused", why, fix)
	}
	ex := Exemption{Category: req.Category, Paths: paths, Reason: req.Reason, GrantedAt: m.mg.o.Now().UTC()}
	if err := m.auditExemption(ctx, req, actor, ""); err != nil {
		return Exemption{}, err // an exemption that is not on record is not granted
	}
	view := m.view.ViewHash()
	_, err := m.run(ctx, &trigger{ev: EvExemption, actor: actor, tool: ToolRequestExemption, note: req.Reason, exempt: &ex,
		meta: map[string]string{"category": string(ex.Category), "paths": strings.Join(ex.Paths, "\n")},
		mutate: func(s *Snapshot) {
			e := ex
			s.Exemption, s.WriteBase = &e, view
		}})
	if err != nil {
		return Exemption{}, err
	}
	return ex, nil
}

// judgeExemption returns the cleaned paths, or why the request is refused.
func (m *Machine) judgeExemption(req ExemptionRequest) (paths []string, why, fix string) {
	r := m.mg.rules
	if err := r.Allowed(*m.pos.Load(), ToolRequestExemption, "", false); err != nil {
		return nil, fmt.Sprintf("the session is in %s (%s mode): exemptions are requested in strict mode while planning or writing tests, once per task", m.snap.State, m.snap.Mode), ""
	}
	if !slices.Contains(Categories, req.Category) {
		return nil, fmt.Sprintf("unknown category %q; the categories are %s", clip(string(req.Category), 64), joinCats()), "use one of the categories"
	}
	globs := r.exempt[req.Category]
	if len(globs) == 0 {
		return nil, "the policy disables the " + string(req.Category) + " category", "follow the TDD flow"
	}
	if req.Reason == "" {
		return nil, "an exemption needs a reason", "say why this change cannot follow TDD"
	}
	if len(req.AffectedPaths) == 0 || len(req.AffectedPaths) > maxPaths {
		return nil, fmt.Sprintf("an exemption names 1 to %d paths, got %d", maxPaths, len(req.AffectedPaths)), "list the files the change touches"
	}
	set := r.exemptSet[req.Category]
	var bad []string
	for _, p := range req.AffectedPaths {
		if len(p) > maxPathBytes || badPath(p) != "" || strings.ContainsFunc(p, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			return nil, fmt.Sprintf("%q is not a clean project-relative file path", clip(p, 200)), "name files relative to the project root"
		}
		c := path.Clean(p)
		if !set.MatchString(c) {
			bad = append(bad, c)
			continue
		}
		if !slices.Contains(paths, c) {
			paths = append(paths, c)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Sprintf("%s do not match the %s globs (%s)", strings.Join(bad, ", "), req.Category, strings.Join(globs, ", ")),
			"follow the TDD flow for these files: write a failing test first"
	}
	slices.Sort(paths)
	return paths, "", ""
}

func (m *Machine) auditExemption(ctx context.Context, req ExemptionRequest, actor, deny string) error {
	ps := make([]string, 0, min(len(req.AffectedPaths), maxPaths))
	for i, p := range req.AffectedPaths {
		if i == maxPaths {
			break
		}
		ps = append(ps, clip(p, 512))
	}
	pj, _ := json.Marshal(ps)
	decision := audit.DecisionAllowed
	if deny != "" {
		decision = audit.DecisionDenied
	}
	_, err := m.mg.o.Audit.Append(context.WithoutCancel(ctx), audit.Event{Type: audit.EventSyscall, Security: true, SyscallType: ToolRequestExemption,
		ToolName: ToolRequestExemption, SessionID: m.id, SessionMode: string(m.snap.Mode), State: string(m.snap.State), Caller: callerOf(actor),
		PolicyDecision: decision, DenyReason: deny, Input: req.Reason,
		Metadata: map[string]string{"category": clip(string(req.Category), 64), "paths": string(pj), "path_count": strconv.Itoa(len(req.AffectedPaths))}})
	if err != nil {
		return fmt.Errorf("audit exemption request of session %s: %w", m.id, err)
	}
	return nil
}
