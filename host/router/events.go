package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/policy"
)

// EventToolReview records a person's answer to a review request. It is a
// security event (written durably).
const EventToolReview audit.EventType = "tool_review"

// Metadata keys of the router's audit records.
const (
	MetaCallID          = "call_id"
	MetaPlugin          = "plugin"
	MetaStage           = "stage"
	MetaErrorCode       = "error_code"
	MetaOutputBytes     = "output_bytes"
	MetaOutputSHA256    = "output_sha256"    // the plugin's output as received
	MetaSanitizedSHA256 = "sanitized_sha256" // what the caller got
	MetaRedactions      = "redactions"
	MetaArg             = "arg"
	// MetaNormalized says what the router repaired in the call (a
	// mangled tool name, wrapped arguments) before judging it.
	MetaNormalized = "normalized"
)

// DecisionEvent is the `syscall` audit record of one policy evaluation
// (decision, rule, duration). The router writes one per request
// of a call and the kernel one per plugin callback, so `policy update`'s
// trial replay reads the same records whoever asked.
func DecisionEvent(req policy.Request, res policy.Result, d time.Duration) audit.Event {
	ev := audit.Event{
		Type: audit.EventSyscall, SyscallType: req.Syscall, Caller: callerName(req.Caller),
		SessionMode: req.SessionMode, State: req.State, PolicyRule: res.DecidingRule(),
		PolicyDecision: DecisionName(res), Duration: d, SandboxID: req.Caller.Instance,
		Metadata: map[string]string{audit.MetaPath: req.Path},
	}
	if req.Host != "" {
		ev.Metadata["host"] = req.Host
	}
	if req.Caller.Kind != "" {
		ev.Metadata["caller_kind"] = req.Caller.Kind
	}
	if len(req.Caller.Tags) > 0 {
		ev.Metadata["caller_tags"] = strings.Join(req.Caller.Tags, ",")
	}
	if req.Sandbox != "" {
		ev.Metadata["sandbox"] = req.Sandbox
	}
	if res.WouldDeny {
		ev.Metadata["would_deny"] = "true"
	}
	if res.Enforced != policy.Allow || res.WouldDeny {
		ev.DenyReason = strings.Join(res.Reasons, "; ")
	}
	return ev
}

// DecisionName maps a result to the policy_decision values.
func DecisionName(r policy.Result) string {
	switch {
	case r.ByToken:
		return audit.DecisionAllowedByToken
	case r.Enforced == policy.Allow:
		return audit.DecisionAllowed
	case r.Enforced == policy.RequireReview:
		return audit.DecisionReviewRequired
	}
	return audit.DecisionDenied
}

func callerName(c policy.Caller) string {
	if c.Plugin != "" {
		return c.Plugin
	}
	if c.Kind != "" {
		return c.Kind
	}
	return "kernel"
}

func (r *Router) append(ctx context.Context, ev audit.Event) {
	if r.o.Audit == nil {
		return
	}
	// The record is written even when the caller's context is already
	// cancelled: a cancelled call must still leave its trail.
	if _, err := r.o.Audit.Append(context.WithoutCancel(ctx), ev); err != nil {
		r.log.Error("audit append failed", "type", ev.Type, "error", err)
	}
}

func (cs *callState) caller() string {
	if cs.sess.Caller != "" {
		return cs.sess.Caller
	}
	return "user"
}

func (r *Router) recordExecute(ctx context.Context, cs *callState) {
	r.append(ctx, audit.Event{
		Type: audit.EventToolExecute, ToolName: cs.call.Tool, Caller: cs.caller(),
		SessionID: cs.sess.ID, SessionMode: cs.sess.Mode, Input: string(cs.call.Args),
		Metadata: map[string]string{MetaCallID: cs.call.ID, MetaPlugin: cs.call.Plugin, "args_bytes": fmt.Sprint(len(cs.call.Args))},
	})
}

func (r *Router) recordSyscall(ctx context.Context, cs *callState, j Judged) {
	ev := DecisionEvent(j.Request, j.Result, j.Duration)
	ev.SessionID, ev.ToolName = cs.sess.ID, cs.call.Tool
	ev.Metadata[MetaCallID] = cs.call.ID
	if j.Arg != "" {
		ev.Metadata[MetaArg] = j.Arg
	}
	if j.Advisory && j.outcome() == policy.Pass {
		ev.Metadata["advisory"] = "no rule about the tool; its paths decide"
	}
	r.append(ctx, ev)
}

func (r *Router) recordReview(ctx context.Context, cs *callState, items []Judged, a Approval, err error) {
	var what []string
	for _, j := range items {
		what = append(what, describe(j))
	}
	md := map[string]string{MetaCallID: cs.call.ID, MetaPlugin: cs.target.Plugin, "approved": fmt.Sprint(a.Approved && err == nil),
		"scope": a.Scope, "by": a.By, "note": a.Note, "requests": strings.Join(what, ", ")}
	decision := audit.DecisionDenied
	if a.Approved && err == nil {
		decision = audit.DecisionAllowed
	}
	ev := audit.Event{Type: EventToolReview, Security: true, ToolName: cs.call.Tool, Caller: "user",
		SessionID: cs.sess.ID, SessionMode: cs.sess.Mode, PolicyDecision: decision, Metadata: md}
	if err != nil {
		ev.DenyReason = err.Error()
	}
	r.append(ctx, ev)
}

func (r *Router) recordResult(ctx context.Context, cs *callState) {
	res := &cs.res
	md := map[string]string{MetaCallID: res.CallID, MetaPlugin: res.Plugin, MetaStage: res.Stage, "ok": fmt.Sprint(res.OK)}
	ev := audit.Event{
		Type: audit.EventToolResult, ToolName: res.Tool, Caller: res.Plugin, SessionID: cs.sess.ID,
		SessionMode: cs.sess.Mode, Duration: res.Duration, SandboxID: res.Instance, Metadata: md,
		PolicyDecision: audit.DecisionAllowed,
	}
	if ev.Caller == "" {
		ev.Caller = "kernel"
	}
	switch res.Stage {
	case StageLookup, StageSchema, StageGate, StagePolicy:
		ev.PolicyDecision = audit.DecisionDenied
	case StageReview:
		ev.PolicyDecision = audit.DecisionReviewRequired
	}
	if cs.origHash != "" {
		md[MetaOutputSHA256] = cs.origHash
		md[MetaOutputBytes] = fmt.Sprint(cs.origLen)
	}
	if res.Stage == StageDone {
		sum := sha256.Sum256(res.Output)
		md[MetaSanitizedSHA256] = hex.EncodeToString(sum[:])
		md[MetaRedactions] = fmt.Sprint(res.Redactions)
		ev.Output = string(res.Output)
		if len(res.Changes) > 0 {
			md["changes"] = fmt.Sprint(len(res.Changes))
			md["out_dir"] = res.OutDir
		}
	}
	if cs.review != nil {
		md["review_scope"] = cs.review.Scope
	}
	if len(res.Normalized) > 0 {
		md[MetaNormalized] = strings.Join(res.Normalized, "; ")
	}
	if res.Err != nil {
		md[MetaErrorCode] = res.Err.Code
		md["retryable"] = fmt.Sprint(res.Retryable)
		ev.DenyReason = res.Err.Error()
	}
	r.append(ctx, ev)
}
