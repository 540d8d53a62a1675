package router

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/policy"
)

type pathArg = manifests.PathArg

// Judged is one policy request a call made and the policy's answer.
type Judged struct {
	Request policy.Request
	// Arg is the argument the path came from ("" for the tool request).
	Arg      string
	Result   policy.Result
	Duration time.Duration
	// Advisory marks the tool-level request of a tool with path arguments:
	// its default-deny ("no rule mentions this tool") is not a refusal,
	// because the paths were judged; rules about the tool still deny or
	// ask for review.
	Advisory bool
}

// outcome is what a judged request means for the call.
func (j Judged) outcome() policy.Action {
	e := j.Result.Enforced
	if j.Advisory && e == policy.Deny && len(j.Result.Deciding) > 0 && j.Result.Deciding[0].Layer == policy.LayerDefault {
		return policy.Pass
	}
	return e
}

// Requests builds the policy requests of a call on t with the given path
// arguments: one per path (as the path's fs.* syscall) and one for the tool
// itself (syscall = tool name, no path). This is the one place that says
// how a tool call is judged.
func Requests(t Target, sess *Session, state string, paths []pathArg) []Judged {
	caller := policy.Caller{Kind: "plugin", Plugin: t.Plugin, PluginKind: t.Kind, Tags: t.Tags, Hosts: t.Hosts}
	base := policy.Request{Caller: caller, Sandbox: t.Sandbox, State: state}
	if sess != nil {
		base.SessionMode = sess.Mode
	}
	out := make([]Judged, 0, len(paths)+1)
	toolReq := base
	toolReq.Syscall = t.Tool.Name
	out = append(out, Judged{Request: toolReq, Advisory: len(paths) > 0})
	for _, p := range paths {
		req := base
		req.Syscall, req.Path = p.Syscall, p.Value
		out = append(out, Judged{Request: req, Arg: p.Arg})
	}
	return out
}

// judge evaluates every request of the call and records each as a syscall
// event. A deny refuses the call; a review goes to the session's approver.
func (r *Router) judge(ctx context.Context, cs *callState, paths []pathArg, gateReviews []string) (string, *uerr.Error) {
	state := ""
	if cs.sess.Gate != nil {
		state = cs.sess.Gate.State()
	}
	js := Requests(cs.target, cs.sess, state, paths)
	var denied *Judged
	var reviews []Judged
	for i := range js {
		j := &js[i]
		t0 := r.o.Now()
		j.Result = r.o.Policy.Evaluate(ctx, j.Request)
		j.Duration = r.o.Now().Sub(t0)
		r.recordSyscall(ctx, cs, *j)
		switch j.outcome() {
		case policy.Deny:
			if denied == nil {
				denied = j
			}
		case policy.RequireReview:
			reviews = append(reviews, *j)
		}
	}
	if denied != nil {
		return StagePolicy, deniedError(cs, *denied)
	}
	if len(reviews) == 0 && len(gateReviews) == 0 {
		return "", nil
	}
	return r.review(ctx, cs, reviews, gateReviews)
}

func describe(j Judged) string {
	if j.Request.Path == "" {
		return j.Request.Syscall
	}
	return fmt.Sprintf("%s of %s", j.Request.Syscall, j.Request.Path)
}

func deniedError(cs *callState, j Judged) *uerr.Error {
	what := fmt.Sprintf("%s by %s is denied", describe(j), cs.target.Plugin)
	if j.Arg != "" {
		what = fmt.Sprintf("%s (argument %s of %s)", what, j.Arg, cs.call.Tool)
	}
	rule := j.Result.DecidingRule()
	why := strings.Join(j.Result.Reasons, "; ")
	if rule != "" {
		why += " (rule " + rule + ")"
	}
	fix := fmt.Sprintf("use another path; to see why, run `fluffy policy explain --syscall %s", j.Request.Syscall)
	if j.Request.Path != "" {
		fix += " --path " + j.Request.Path
	}
	fix += " --caller " + cs.target.Plugin + "`"
	return uerr.New(CodePolicyDenied, what, why, fix)
}

// review hands the call to the approver.
func (r *Router) review(ctx context.Context, cs *callState, items []Judged, gateReviews []string) (string, *uerr.Error) {
	var parts, reasons []string
	for _, j := range items {
		parts = append(parts, describe(j))
		reasons = append(reasons, j.Result.Reasons...)
	}
	if len(gateReviews) > 0 {
		parts = append(parts, cs.call.Tool)
		reasons = append(reasons, gateReviews...)
	}
	what := fmt.Sprintf("%s by %s needs review", strings.Join(parts, ", "), cs.target.Plugin)
	if cs.sess.Approver == nil {
		return StageReview, uerr.New(CodeReviewRequired, what, strings.Join(reasons, "; ")+"; nobody is here to review it",
			"run the call where you can approve it (an interactive terminal or session), or change the policy with `fluffy policy update`")
	}
	args, _, err := r.sanitize(cs.call.Args)
	if err != nil {
		args = json.RawMessage(`"(arguments not shown: ` + err.Error() + `)"`)
	}
	a, err := cs.sess.Approver.Review(ctx, ReviewRequest{CallID: cs.call.ID, Plugin: cs.target.Plugin, Tool: cs.call.Tool, Args: args, Items: items, Reasons: reasons})
	if a.Scope == "" {
		a.Scope = ScopeOnce
	}
	cs.review = &a
	r.recordReview(ctx, cs, items, a, err)
	if err != nil {
		return StageReview, uerr.Wrap(err, CodeReviewRejected, what+"; the review did not complete", err.Error(), "approve the call when asked")
	}
	if !a.Approved {
		why := "the reviewer rejected it"
		if a.Note != "" {
			why += ": " + a.Note
		}
		return StageReview, uerr.New(CodeReviewRejected, what+"; rejected", why, "do something else, or ask the user what they want")
	}
	return "", nil
}
