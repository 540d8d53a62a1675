package task

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/pin"
)

// Codes of the "always" flow's errors.
const (
	CodeScopeUnsupported    = "REVIEW_SCOPE_UNSUPPORTED"
	CodePolicyChangedOnDisk = "POLICY_CHANGED_ON_DISK"
)

// amender turns a tool review answered "always" into a policy.update: the
// canonical change (policy.Amend) is trialled against the recent decisions
// of the audit log (policy.Prepare), shown to the person as a review of
// its own, and only when approved written to the project's policy file
// and swapped into the engine (policy.Commit), with a policy_update audit
// record. It is the same mechanism as `fluffy policy update`.
type amender struct {
	engine *policy.Engine
	path   string // the project's policy file
	audit  Auditor
	// pins, when set, approves the content written (the review is the
	// person's approval), so the file stays in force (policy/pin).
	pins    *pin.Store
	project string
	mu      sync.Mutex // one policy change at a time
}

// proposal is one "always" on its way to the policy file.
type proposal struct {
	ex   []policy.Exemption
	base string // hash of the policy it amends
	am   *policy.Amendment
	prop *policy.Proposal // the trial, once run
}

// exemptions are the review's requests as policy exemptions, or why the
// review cannot be made permanent by a policy change. wholeTool says the
// reviewed tool's name is all the policy needs to name it exactly (a
// tool of one MCP server: "always" approves that tool, whatever its
// arguments, as "session" does).
func exemptions(r router.ReviewRequest, wholeTool bool) ([]policy.Exemption, error) {
	n := 0
	var ex []policy.Exemption
	for _, it := range r.Items {
		n += len(it.Result.Reasons)
		var rules []string
		for _, d := range it.Result.Deciding {
			if d.Action != policy.RequireReview {
				continue
			}
			if d.Layer != policy.LayerYAML {
				return nil, uerr.New(policy.CodeAmend, "\"always\" is not possible for this review",
					fmt.Sprintf("the %s rule %s asks for it, and only the policy file's rules can be changed", d.Layer, d.Rule), "approve it once or for this session")
			}
			rules = append(rules, d.Rule)
		}
		ex = append(ex, policy.Exemption{Request: it.Request, Rules: rules, AnyArguments: wholeTool && it.Request.Path == ""})
	}
	if len(r.Reasons) > n {
		return nil, uerr.New(policy.CodeAmend, "\"always\" is not possible for this review",
			"the workflow asks for it (debug mode), not a rule of the policy file", "approve it once or for this session")
	}
	if len(ex) == 0 {
		return nil, uerr.New(policy.CodeAmend, "\"always\" is not possible for this review", "no policy rule sent it to review", "approve it once")
	}
	return ex, nil
}

// propose computes the change "always" would make to the policy in force,
// or why it cannot.
func (a *amender) propose(r router.ReviewRequest, wholeTool bool) (*proposal, error) {
	ex, err := exemptions(r, wholeTool)
	if err != nil {
		return nil, err
	}
	base := a.engine.Policy()
	if err := a.current(base); err != nil {
		return nil, err
	}
	gate := a.engine.Evaluate(context.Background(), policy.Request{Syscall: "policy.update", Caller: policy.Caller{Kind: "user"}})
	if gate.Decision == policy.Deny {
		return nil, uerr.New(policy.CodeAmend, "\"always\" is not possible: the policy denies policy updates", strings.Join(gate.Reasons, "; "), "approve it once or for this session")
	}
	am, err := policy.Amend(base, ex)
	if err != nil {
		return nil, err
	}
	return &proposal{ex: ex, base: base.Hash, am: am}, nil
}

// current checks that the policy file on disk is the policy in force (a
// file edited since the kernel loaded it is not overwritten with an
// amendment of the old one).
func (a *amender) current(p *policy.Policy) error {
	if u := p.Unapproved; u != nil {
		return uerr.New(CodePolicyChangedOnDisk, "\"always\" is not possible: "+u.Path+" is not trusted",
			"the embedded default applies in its place, and the change would be made to a policy you have not approved",
			"approve it once or for this session; review the file and run `fluffy policy trust` first")
	}
	data, err := os.ReadFile(a.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the embedded default: the amendment creates the file
	}
	if err != nil {
		return uerr.Wrap(err, policy.CodeRead, "cannot read "+a.path, err.Error(), "check its permissions")
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != p.Hash {
		return uerr.New(CodePolicyChangedOnDisk, "\"always\" is not possible: "+a.path+" changed since this kernel loaded it",
			"the change would be made to a policy you no longer have", "approve it once or for this session; restart the session to load the edited policy")
	}
	return nil
}

// trial runs the proposal against the recent recorded decisions.
func (a *amender) trial(p *proposal) error {
	prop, err := policy.Prepare(a.path, p.am.Content, a.audit)
	if err != nil {
		return err
	}
	p.prop = prop
	return nil
}

// apply writes the approved proposal. When another change landed since it
// was computed, it is computed and trialled again on the policy in force
// (the same items, at their new place).
func (a *amender) apply(ctx context.Context, p *proposal, session string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.engine.Policy()
	if err := a.current(cur); err != nil {
		return err
	}
	if cur.Hash != p.base {
		am, err := policy.Amend(cur, p.ex)
		if err != nil {
			return err
		}
		p.am, p.base = am, cur.Hash
		if err := a.trial(p); err != nil {
			return err
		}
	}
	write := func() error { return policy.Commit(a.path, p.prop, "", a.engine) }
	if a.pins != nil {
		if err := a.pins.Written(a.project, p.am.Content, "review: always", write); err != nil {
			return err
		}
	} else if err := write(); err != nil {
		return err
	}
	sum := sha256.Sum256(p.am.Content)
	return a.audit.RecordPolicyChange(ctx, PolicyChange{
		Path: a.path, OldHash: p.base, NewHash: hex.EncodeToString(sum[:]),
		Replayed: p.prop.Replayed, Changes: len(p.prop.Changes), Breaking: p.prop.Breaking,
		Via: "review: always", Added: p.am.String(), Session: session,
	})
}

// change is the proposal as the review event shows it.
func (p *proposal) change(file string) *agent.PolicyChange {
	c := &agent.PolicyChange{File: file, Rules: p.am.String(), Diff: p.am.Diff}
	if p.prop != nil {
		c.Trial = &agent.PolicyTrial{Replayed: p.prop.Replayed, Breaking: p.prop.Breaking}
		for i, ch := range p.prop.Changes {
			if i == 20 {
				c.Trial.Changes = append(c.Trial.Changes, fmt.Sprintf("… and %d more", len(p.prop.Changes)-i))
				break
			}
			c.Trial.Changes = append(c.Trial.Changes, ch.String())
		}
	}
	return c
}

// always runs the policy.update review of an approved "always": the
// proposal, its trial, the person's answer, the write. It reports whether
// the policy changed; the call itself is approved either way (the person
// approved it).
func (t *Tasks) always(ctx context.Context, p *proposal) (bool, string) {
	a := t.am
	fail := func(err error) (bool, string) {
		ue := uerr.From(err)
		t.publish(agent.Event{Type: agent.EventError, Error: ue})
		return false, "approved once; the policy was not changed: " + ue.What
	}
	if err := a.trial(p); err != nil {
		return fail(err)
	}
	var rules []string
	for _, it := range p.am.Items {
		rules = append(rules, it.Rule)
	}
	sum := fmt.Sprintf("policy.update: %s (trial: %d recent decisions replayed, %d change)", strings.Join(rules, ", "), p.prop.Replayed, len(p.prop.Changes))
	ap, err := t.review(ctx, agent.ReviewEvent{Kind: "policy.update", Summary: sum, Scopes: []string{router.ScopeOnce}, Policy: p.change(a.path)})
	if err != nil {
		return fail(err)
	}
	if !ap.Approved {
		// A refused change is a security decision too: the record says
		// what was proposed and that the person said no.
		reason := "the person rejected the proposed change"
		if ap.Note != "" {
			reason += ": " + textsafe.Line(ap.Note, 300)
		}
		if _, err := t.k.Audit.Append(ctx, audit.Event{
			Type: audit.EventPolicyUpdate, Caller: "user", SyscallType: "policy.update", SessionID: t.sessionID(),
			PolicyDecision: audit.DecisionDenied, DenyReason: reason,
			Metadata: map[string]string{"path": a.path, "via": "review: always", "proposed": strings.Join(rules, ", "), "old_hash": a.engine.Policy().Hash},
		}); err != nil {
			t.log.Warn("cannot audit a rejected policy update", "error", err)
		}
		return false, "approved once; the proposed policy change was rejected"
	}
	if err := a.apply(ctx, p, t.sessionID()); err != nil {
		return fail(err)
	}
	t.publish(agent.Event{Type: agent.EventNotice, Text: "policy updated: " + a.path + " (" + strings.Join(rules, ", ") + ")"})
	return true, "approved always: " + a.path + " changed"
}

func (t *Tasks) sessionID() string {
	if t.k.Session == nil {
		return ""
	}
	return t.k.Session.ID()
}
