package kernel

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/token"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// Audit event types the kernel adds to the audit package's.
const (
	EventNetworkRequest audit.EventType = "network_request"
	// Plugin registry events are "plugin_<what>" (plugin_install,
	// plugin_install_forced, plugin_remove, plugin_enable, plugin_disable,
	// plugin_rejected).
)

// Auditor connects the parts that produce audit events (registry, sandbox
// proxy, policy engine) to an audit log, so none of them imports it.
type Auditor struct {
	Log    *audit.Log
	Logger hclog.Logger
}

func (a Auditor) append(ctx context.Context, ev audit.Event) {
	if a.Log == nil {
		return
	}
	if _, err := a.Log.Append(ctx, ev); err != nil && a.Logger != nil {
		a.Logger.Error("audit append failed", "type", ev.Type, "error", err)
	}
}

// Append writes ev; a failure is logged, not returned (callbacks.Auditor):
// the call it records goes on either way.
func (a Auditor) Append(ctx context.Context, ev audit.Event) { a.append(ctx, ev) }

// RecordPluginEvent implements registry.Auditor.
func (a Auditor) RecordPluginEvent(ctx context.Context, event string, rec registry.Record, security bool) error {
	if a.Log == nil {
		return nil
	}
	_, err := a.Log.Append(ctx, audit.Event{
		Type: audit.EventType(event), Security: security, Caller: "user",
		DenyReason: rec.Reason,
		Metadata: map[string]string{
			"plugin": rec.Name, "version": rec.Version, "kind": rec.Kind, "sha256": rec.SHA256,
			"state": string(rec.State), "tags": strings.Join(rec.Tags, ","), "source": rec.Source,
			"requested_tags": strings.Join(rec.RequestedTags, ","), "granted_tags": strings.Join(rec.GrantedTags, ","),
			"manifest": rec.ManifestPath, "certified": certSummary(rec.Certification),
		},
	})
	return err
}

// certSummary says what a certification established: a run where no MUST
// failed but some were not checked is "not-certified", not "failed"
// (suite 2.0.0: a skipped MUST means not certified).
func certSummary(c *registry.Certification) string {
	if c == nil {
		return "none"
	}
	if c.Passed {
		return "passed"
	}
	s := "failed"
	if len(c.Failed) == 0 && len(c.Skipped) > 0 {
		s = "not-certified"
	}
	if c.Forced {
		s += "-forced"
	}
	return s
}

// NetworkRequest implements sandbox.Auditor: every proxied request, allowed
// or refused, is a security event.
func (a Auditor) NetworkRequest(ctx context.Context, ev sandbox.NetworkEvent) {
	decision := audit.DecisionAllowed
	if !ev.Allowed {
		decision = audit.DecisionDenied
	}
	a.append(ctx, audit.Event{
		Type: EventNetworkRequest, Security: true, SyscallType: "net.connect", Caller: ev.Plugin,
		PolicyDecision: decision, DenyReason: ev.Reason, SandboxID: ev.Instance,
		Metadata: map[string]string{"host": ev.Target},
	})
}

// RecordDecision writes one policy decision as a `syscall` record (the
// trial replay of `policy update` reads these back).
func (a Auditor) RecordDecision(ctx context.Context, req policy.Request, res policy.Result, d time.Duration) {
	a.append(ctx, router.DecisionEvent(req, res, d))
}

// RecordCapability writes the durable capability_issued event.
func (a Auditor) RecordCapability(ctx context.Context, plugin, instance string, t token.Token) {
	a.append(ctx, audit.Event{
		Type: audit.EventCapabilityIssued, Caller: plugin, SyscallType: t.Scope.Syscall, CapabilityID: t.ID, SandboxID: instance,
		Metadata: map[string]string{"paths": strings.Join(t.Scope.Paths, ","), "max_ops": fmt.Sprint(t.Scope.MaxOps), "expires": t.Expires.UTC().Format(time.RFC3339)},
	})
}

// RecordCapabilityEnd writes capability_expired for a token the kernel
// removed (why: expired or used up, its instance stopped).
func (a Auditor) RecordCapabilityEnd(ctx context.Context, t token.Token, why string) {
	a.append(ctx, audit.Event{
		Type: audit.EventCapabilityExpired, Caller: pluginOfInstance(t.Binding.Instance), SyscallType: t.Scope.Syscall,
		CapabilityID: t.ID, SandboxID: t.Binding.Instance,
		Metadata: map[string]string{"paths": strings.Join(t.Scope.Paths, ","), "max_ops": fmt.Sprint(t.Scope.MaxOps),
			"expires": t.Expires.UTC().Format(time.RFC3339), "reason": why},
	})
}

// pluginOfInstance is the plugin name of an instance id (<plugin>-<random>).
func pluginOfInstance(id string) string {
	if i := strings.LastIndexByte(id, '-'); i > 0 {
		return id[:i]
	}
	return id
}

// RecordPolicyUpdate writes the durable policy_update event.
func (a Auditor) RecordPolicyUpdate(ctx context.Context, path string, replayed, changes, breaking int) error {
	return a.RecordPolicyChange(ctx, PolicyChangeRecord{Path: path, Replayed: replayed, Changes: changes, Breaking: breaking})
}

// PolicyChangeRecord is one applied policy change, for the audit log; the
// task runner's "always" writes one too (task.Auditor).
type PolicyChangeRecord = task.PolicyChange

// RecordPolicyChange writes the durable policy_update event.
func (a Auditor) RecordPolicyChange(ctx context.Context, c PolicyChangeRecord) error {
	if a.Log == nil {
		return nil
	}
	md := map[string]string{"path": c.Path, "replayed": fmt.Sprint(c.Replayed), "changes": fmt.Sprint(c.Changes), "breaking": fmt.Sprint(c.Breaking)}
	for k, v := range map[string]string{"old_hash": c.OldHash, "new_hash": c.NewHash, "via": c.Via, "added": c.Added} {
		if v != "" {
			md[k] = v
		}
	}
	_, err := a.Log.Append(ctx, audit.Event{
		Type: audit.EventPolicyUpdate, Caller: "user", SyscallType: "policy.update", SessionID: c.Session, Metadata: md,
	})
	return err
}

// RecentDecisions implements policy.DecisionSource over the audit log:
// the last n policy decisions, newest last.
func (a Auditor) RecentDecisions(n int) ([]policy.RecordedDecision, error) {
	if a.Log == nil {
		return nil, nil
	}
	// Older logs hold policy_decision records; since the router, every
	// evaluation is a syscall record.
	recs, err := a.Log.Query(context.Background(), audit.Filter{Types: []audit.EventType{audit.EventSyscall, audit.EventPolicyDecision}, Limit: n, Newest: true})
	if err != nil {
		return nil, err
	}
	out := make([]policy.RecordedDecision, 0, len(recs))
	for _, r := range recs {
		req := policy.Request{Syscall: r.SyscallType, Path: r.Metadata["path"], Host: r.Metadata["host"], Sandbox: r.Metadata["sandbox"],
			SessionMode: r.SessionMode, State: r.StateMachineState}
		req.Caller.Kind = r.Metadata["caller_kind"]
		if req.Caller.Kind == "plugin" {
			req.Caller.Plugin = r.Caller
		}
		if t := r.Metadata["caller_tags"]; t != "" {
			req.Caller.Tags = strings.Split(t, ",")
		}
		d := policy.Deny
		switch r.PolicyDecision {
		case audit.DecisionAllowed, audit.DecisionAllowedByToken:
			d = policy.Allow
		case audit.DecisionReviewRequired:
			d = policy.RequireReview
		}
		out = append(out, policy.RecordedDecision{Request: req, Decision: d, Rule: r.PolicyRuleName, At: time.UnixMilli(r.Timestamp)})
	}
	return out, nil
}

// RecordUnapprovedPolicy records that the project's policy file is not in
// force because the user has not approved its content (policy/pin): the
// embedded default (hash inForce) applies instead. when says at which
// point it was found ("kernel start", "file changed on disk").
func (a Auditor) RecordUnapprovedPolicy(ctx context.Context, u *policy.Unapproved, inForce, when string) error {
	if a.Log == nil || u == nil {
		return nil
	}
	_, err := a.Log.Append(ctx, audit.Event{
		Type: audit.EventPolicyUpdate, Caller: "kernel", SyscallType: "policy.trust",
		PolicyDecision: audit.DecisionDenied, DenyReason: u.Notice(),
		Metadata: map[string]string{"path": u.Path, "file_hash": u.Hash, "in_force_hash": inForce, "via": when, "changed": fmt.Sprint(u.Changed)},
	})
	return err
}
