package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/glob"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy/testpaths"
	"github.com/fluffy-waffle/fluffy/policy/token"
)

// DefaultExtensionTimeout is the per-evaluation budget of an
// extension rule.
const DefaultExtensionTimeout = 100 * time.Millisecond

// Options are an Engine's dependencies. Zero values are usable.
type Options struct {
	Logger hclog.Logger
	// Clock is read exactly once per evaluation (the time snapshot).
	Clock func() time.Time
	// Tokens holds capability tokens; nil creates a private store.
	Tokens *token.Store
	// Extensions are the policy-kind plugins, evaluated last.
	Extensions []Extension
	// ExtensionTimeout is each extension's deadline (default 100 ms).
	ExtensionTimeout time.Duration
	// RestartTimeout bounds one extension restart (default 10 s).
	RestartTimeout time.Duration
}

// Engine evaluates requests against the built-in rules, capability tokens,
// the current Policy and extensions. It is safe for concurrent use; the
// policy can be swapped at any time (hot reload) without a restart.
type Engine struct {
	policy   atomic.Pointer[Policy]
	builtins []builtinRule
	tokens   *token.Store
	exts     atomic.Pointer[[]*extSlot]
	clock    func() time.Time
	log      hclog.Logger
	extTO    time.Duration
	restTO   time.Duration
	bg       sync.WaitGroup
	closed   atomic.Bool
}

// NewEngine returns an engine for p (nil p = no YAML rules).
func NewEngine(p *Policy, o Options) *Engine {
	if p == nil {
		p = &Policy{File: "(none)", index: buildIndex(nil), Tests: testpaths.MustDefault()}
	}
	e := &Engine{
		builtins: builtinRules(),
		tokens:   o.Tokens,
		clock:    o.Clock,
		log:      o.Logger,
		extTO:    o.ExtensionTimeout,
		restTO:   o.RestartTimeout,
	}
	if e.tokens == nil {
		e.tokens = token.NewStore()
	}
	if e.clock == nil {
		e.clock = time.Now
	}
	if e.log == nil {
		e.log = hclog.NewNullLogger()
	}
	if e.extTO <= 0 {
		e.extTO = DefaultExtensionTimeout
	}
	if e.restTO <= 0 {
		e.restTO = 10 * time.Second
	}
	e.SetExtensions(o.Extensions)
	e.policy.Store(p)
	return e
}

// Policy returns the policy in force.
func (e *Engine) Policy() *Policy { return e.policy.Load() }

// CodeTokenLimit refuses a capability token beyond token.MaxOps,
// token.MaxTTL or token.MaxLivePerInstance.
const CodeTokenLimit = "POLICY_TOKEN_LIMIT"

// Swap installs p (hot reload) and returns the previous policy. Every
// capability token is revoked: it was judged by the old policy, and the
// fast path would let it skip the new policy's YAML rules.
func (e *Engine) Swap(p *Policy) *Policy {
	old := e.policy.Swap(p)
	e.tokens.RevokeAll()
	e.log.Info("policy reloaded", "file", p.File, "hash", p.Hash, "rules", len(p.Rules))
	return old
}

// Tokens returns the engine's token store.
func (e *Engine) Tokens() *token.Store { return e.tokens }

// Close waits for background extension restarts to finish.
func (e *Engine) Close() {
	e.closed.Store(true)
	e.bg.Wait()
}

// Evaluate judges req. It never fails: anything unexpected is a deny with
// a reason.
func (e *Engine) Evaluate(ctx context.Context, req Request) Result {
	return e.evaluate(ctx, e.policy.Load(), &req, evalOpts{tokens: true, exts: true})
}

// Explain is Evaluate without side effects (tokens are checked, not
// consumed), recording every rule evaluated in Result.Trace and continuing
// past a deny in the built-in and YAML layers so the user sees every rule
// that matched. Extensions still never run after a deny.
func (e *Engine) Explain(ctx context.Context, req Request) Result {
	return e.evaluate(ctx, e.policy.Load(), &req, evalOpts{trace: true, tokens: true, peek: true, exts: true})
}

type evalOpts struct {
	trace  bool
	tokens bool
	peek   bool
	exts   bool
}

// collector aggregates verdicts: first deny, every review, every allow.
// The trace lives outside it: a field flowing into the Result would make
// escape analysis move the collector's stack buffer to the heap.
type collector struct {
	deny    *RuleEval
	reviews evList
	allows  evList
}

// evList keeps the first few verdicts in place (no heap allocation).
type evList struct {
	fixed [3]RuleEval
	n     int
	more  []RuleEval
}

func (l *evList) add(ev RuleEval) {
	if l.n < len(l.fixed) {
		l.fixed[l.n] = ev
		l.n++
		return
	}
	l.more = append(l.more, ev)
}

func (l *evList) len() int { return l.n + len(l.more) }

func (l *evList) slice() []RuleEval {
	out := make([]RuleEval, 0, l.len())
	out = append(out, l.fixed[:l.n]...)
	return append(out, l.more...)
}

func (c *collector) add(ev RuleEval) {
	if !ev.Matched {
		return
	}
	switch ev.Action {
	case Deny:
		if c.deny == nil {
			d := ev
			c.deny = &d
		}
	case RequireReview:
		c.reviews.add(ev)
	case Allow:
		c.allows.add(ev)
	}
}

// pathSegs is how many path segments the engine splits without a heap
// allocation; deeper paths still work, with one allocation.
const pathSegs = 16

func (e *Engine) evaluate(ctx context.Context, pol *Policy, req *Request, o evalOpts) Result {
	now := e.clock() // the one time snapshot of this evaluation (case 22)
	// The path is split and validated once, into a stack buffer, and that
	// one split serves the built-ins, the token scope and the YAML rules.
	var segBuf [pathSegs]string
	p := prepareBuf(req, segBuf[:0])
	var c collector
	var trace []RuleEval
	res := Result{At: now}

	// Phase 0: built-in rules, always, on every path.
	for i := range e.builtins {
		b := &e.builtins[i]
		a, why := b.eval(&p)
		if a == Pass && !o.trace {
			continue // an abstention changes nothing outside a trace
		}
		record(&c, &trace, o.trace, RuleEval{Rule: b.name, Layer: LayerBuiltin, Matched: a != Pass, Action: a, Reason: why})
		if c.deny != nil && !o.trace {
			return e.finish(pol, res, &c, trace)
		}
	}
	if c.deny != nil {
		return e.finish(pol, res, &c, trace)
	}

	// Fast path: a valid capability token skips the YAML and extension layers.
	if o.tokens && req.Token != nil && !p.root { // tokens never cover the project root
		b := token.Binding{Instance: req.Caller.Instance, PID: req.Peer.PID, ContainerID: req.Peer.ContainerID}
		var st token.Status
		if o.peek {
			st = e.tokens.Peek(*req.Token, b, req.Syscall, p.path, now)
		} else {
			st = e.tokens.Consume(*req.Token, b, req.Syscall, p.path, now)
		}
		if st == token.Valid {
			res.ByToken = true
			ev := RuleEval{Rule: req.Token.ID, Layer: LayerToken, Matched: true, Action: Allow, Reason: "valid capability token"}
			if o.trace {
				trace = append(trace, ev)
			}
			if c.reviews.len() == 0 {
				// What finish returns for a lone allow (no deny, no review:
				// Decision Allow is never turned into a would-deny), built
				// directly.
				res.Trace = trace
				res.Decision, res.Enforced = Allow, Allow
				res.Deciding = []RuleEval{ev}
				return res
			}
			return e.finish(pol, res, &c, trace)
		}
		res.TokenStatus = st.String()
	}

	// Slow path: YAML rules indexed by syscall.
	for _, r := range pol.index.lookup(req.Syscall) {
		record(&c, &trace, o.trace, r.eval(&p))
		if c.deny != nil && !o.trace {
			return e.finish(pol, res, &c, trace)
		}
	}
	if c.deny != nil {
		return e.finish(pol, res, &c, trace)
	}

	// Extension rules, each within its deadline.
	if o.exts {
		for _, s := range e.slots() {
			record(&c, &trace, o.trace, e.callExtension(ctx, s, req))
			if c.deny != nil {
				return e.finish(pol, res, &c, trace)
			}
		}
	}
	return e.finish(pol, res, &c, trace)
}

// record adds ev to the collector and, when tracing, to the trace.
func record(c *collector, trace *[]RuleEval, tracing bool, ev RuleEval) {
	c.add(ev)
	if tracing {
		*trace = append(*trace, ev)
	}
}

// finish turns the collected verdicts into a Result.
func (e *Engine) finish(pol *Policy, res Result, c *collector, trace []RuleEval) Result {
	res.Trace = trace
	switch {
	case c.deny != nil:
		res.Decision = Deny
		res.Deciding = []RuleEval{*c.deny}
		res.Reasons = []string{c.deny.Reason}
	case c.reviews.len() > 0:
		res.Decision = RequireReview
		res.Deciding = c.reviews.slice()
		for _, r := range res.Deciding {
			res.Reasons = append(res.Reasons, r.Reason)
		}
	case c.allows.len() > 0:
		res.Decision = Allow
		res.Deciding = c.allows.slice()
	default:
		res.Decision = Deny
		ev := RuleEval{Rule: "default-deny", Layer: LayerDefault, Matched: true, Action: Deny,
			Reason: "no rule explicitly allowed this operation"}
		res.Deciding = []RuleEval{ev}
		res.Reasons = []string{ev.Reason}
	}
	if res.ByToken && res.Decision != Allow {
		res.ByToken = false
	}
	res.Enforced = res.Decision
	if pol.Mode == Observe && res.Decision == Deny && res.Deciding[0].Layer != LayerBuiltin {
		// Observe mode: recorded as would-deny, not enforced. Built-in
		// protections are always enforced.
		res.Enforced, res.WouldDeny = Allow, true
	}
	return res
}

func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("*?[]\\!#", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Issue evaluates req as a capability-token request (ForToken) and, when
// the policy allows it outright, issues a token bound to the caller's
// instance and peer for scope (syscall, maxOps, TTL; the path is always
// exactly req.Path). A require_review or deny result issues
// nothing; the Result says why.
func (e *Engine) Issue(ctx context.Context, req Request, scope token.Scope) (token.Token, Result, error) {
	req.ForToken = true
	req.Token = nil
	if scope.Syscall == "" {
		scope.Syscall = req.Syscall
	}
	if scope.Syscall != req.Syscall {
		return token.Token{}, Result{}, uerr.New("POLICY_TOKEN_SCOPE", "token scope syscall differs from the request",
			fmt.Sprintf("scope %q, request %q", scope.Syscall, req.Syscall), "request a token for the syscall being evaluated")
	}
	res := e.Evaluate(ctx, req)
	if res.Enforced != Allow || res.Decision != Allow {
		return token.Token{}, res, nil
	}
	// A rule's token_ttl / token_max_ops narrow what was asked for.
	for _, d := range res.Deciding {
		for _, r := range e.Policy().Rules {
			if r.Name != d.Rule || d.Layer != LayerYAML {
				continue
			}
			if t := r.constraints.tokenTTL; t > 0 && (scope.TTL == 0 || scope.TTL > t) {
				scope.TTL = t
			}
			if m := r.constraints.tokenMaxOps; m > 0 && (scope.MaxOps == 0 || scope.MaxOps > m) {
				scope.MaxOps = m
			}
		}
	}
	if scope.MaxOps == 0 {
		scope.MaxOps = 1
	}
	// The token covers exactly the path that was evaluated: a wider glob
	// would let it skip YAML rules never evaluated for the other paths.
	scope.Paths = nil
	if req.Path != "" && confine.IsRoot(req.Path) {
		return token.Token{}, res, uerr.New("POLICY_TOKEN_SCOPE", "no capability tokens for the project root",
			"a token covers exactly one file or directory below the root", "request a token for a path inside the project")
	}
	if req.Path != "" {
		scope.Paths = []string{"/" + escapeGlob(glob.ParsePath(req.Path).String())}
	}
	b := token.Binding{Instance: req.Caller.Instance, PID: req.Peer.PID, ContainerID: req.Peer.ContainerID}
	tok, err := e.tokens.Issue(b, scope, res.At)
	if errors.Is(err, token.ErrLimit) {
		return token.Token{}, res, uerr.Wrap(err, CodeTokenLimit, "capability token refused: over its bounds", err.Error(),
			fmt.Sprintf("ask for at most %d operations and %v (default %v), and let used tokens expire (at most %d live per instance)",
				token.MaxOps, token.MaxTTL, token.DefaultTTL, token.MaxLivePerInstance))
	}
	if err != nil {
		return token.Token{}, res, uerr.Wrap(err, "POLICY_TOKEN_ISSUE", "cannot issue capability token", err.Error(), "give the request a plugin instance and a valid scope")
	}
	return tok, res, nil
}
