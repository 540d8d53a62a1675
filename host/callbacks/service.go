package callbacks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/kernel"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/token"
)

// Policy judges every callback and issues capability tokens.
type Policy interface {
	Evaluate(ctx context.Context, req policy.Request) policy.Result
	Issue(ctx context.Context, req policy.Request, scope token.Scope) (token.Token, policy.Result, error)
}

// Auditor records what the callbacks decide. Its methods report no error:
// a failed append is the auditor's to log, the plugin's call goes on.
type Auditor interface {
	Append(ctx context.Context, ev audit.Event)
	RecordDecision(ctx context.Context, req policy.Request, res policy.Result, d time.Duration)
	RecordCapability(ctx context.Context, plugin, instance string, t token.Token)
}

// Views opens a plugin's own view of the session (the project with the
// changeset applied, minus what the policy denies it).
type Views interface {
	ViewRoot(plugin string) (*confine.Root, error)
}

// Options are the service's dependencies.
type Options struct {
	Policy Policy
	Audit  Auditor
	Views  Views
	Logger hclog.Logger
	// Caller is who an instance of spec is to the policy.
	Caller func(spec supervisor.Spec, instance string) policy.Caller
	// Sandbox names the L2 sandbox spec's instances run in ("" when the
	// kernel does not sandbox plugins); a rule's require_sandbox sees it.
	Sandbox func(spec supervisor.Spec) string
	// Progress receives the plugins' progress lines (nil: dropped).
	Progress func(string)
}

// Service builds the callback service of each plugin instance.
type Service struct {
	o Options
}

// New returns the service; o.Logger may be nil.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	return &Service{o: o}
}

// For is the callback service of one instance (supervisor.Options'
// KernelService): every call is attributed to that instance, so a plugin
// cannot ask on another's behalf, and tokens are bound to it. peer says
// what the instance runs as, read at each call.
func (s *Service) For(instanceID string, spec supervisor.Spec, peer func() supervisor.Peer) kernel.Service {
	return &callbacks{Options: s.o, instance: instanceID, spec: spec, peer: peer,
		limit: newCallbackLimiter(CallbackRate, CallbackBurst, time.Now),
		issue: newCallbackLimiter(CapabilityRate, CapabilityBurst, time.Now)}
}

// callbacks is the kernel service one plugin instance reaches through its
// GRPCBroker.
type callbacks struct {
	Options
	instance string
	spec     supervisor.Spec
	peer     func() supervisor.Peer
	limit    *callbackLimiter
	issue    *callbackLimiter // capability tokens, within limit
}

var _ kernel.Service = (*callbacks)(nil)

// Capability tokens: an instance may be issued
// CapabilityRate tokens a second beyond a burst of CapabilityBurst; the
// store bounds each token (token.MaxOps, token.MaxTTL) and how many an
// instance holds (token.MaxLivePerInstance), and the kernel sweeps
// expired ones every TokenSweepInterval.
const (
	CapabilityRate  = 5
	CapabilityBurst = 20
	// CodeTokenInvalid refuses a call that presented a token the kernel
	// does not accept (unknown, expired, used up, another instance's or
	// peer's, another path or syscall, a replayed nonce).
	CodeTokenInvalid = "KERNEL_TOKEN_INVALID"
	// CodeCapabilityUndeclared refuses a callback for a syscall the
	// plugin's manifest does not list in required_capabilities.
	CodeCapabilityUndeclared = "KERNEL_CAPABILITY_UNDECLARED"
)

// Callback rate limits per plugin instance: every
// callback is judged and audited, so a flood of them is a flood of audit
// records. Beyond the burst, an instance gets CallbackRate calls a second.
const (
	CallbackRate  = 50
	CallbackBurst = 200
	// CodeRateLimited refuses a callback over the instance's rate.
	CodeRateLimited = "KERNEL_RATE_LIMITED"
	// maxProgressLine bounds a progress line a plugin reports.
	maxProgressLine = 256
)

// callbackLimiter is a token bucket. It also says when a refusal starts a
// run of refusals, so that a run is audited once, not per call.
type callbackLimiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	tokens  float64
	last    time.Time
	now     func() time.Time
	limited bool // refusing since the last allowed call
	refused uint64
}

func newCallbackLimiter(rate, burst int, now func() time.Time) *callbackLimiter {
	return &callbackLimiter{rate: float64(rate), burst: float64(burst), tokens: float64(burst), now: now}
}

// allow takes a token. first is true for the first refusal of a run.
func (l *callbackLimiter) allow() (ok, first bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.now()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+t.Sub(l.last).Seconds()*l.rate)
	}
	l.last = t
	if l.tokens >= 1 {
		l.tokens--
		l.limited = false
		return true, false
	}
	l.refused++
	first = !l.limited
	l.limited = true
	return false, first
}

// admit applies the instance's rate limit to one callback.
func (c *callbacks) admit(ctx context.Context, what string) error {
	ok, first := c.limit.allow()
	if ok {
		return nil
	}
	if first {
		c.Logger.Warn("plugin callbacks rate limited", "plugin", c.spec.Name, "instance", c.instance, "rate", CallbackRate, "burst", CallbackBurst)
		c.Audit.Append(ctx, audit.Event{Type: audit.EventSyscall, SyscallType: what, Caller: c.spec.Name,
			PolicyDecision: audit.DecisionDenied, DenyReason: fmt.Sprintf("rate limited: more than %d kernel callbacks a second (burst %d) from instance %s; further refusals in this run are not recorded", CallbackRate, CallbackBurst, c.instance),
			SandboxID: c.instance})
	}
	return uerr.New(CodeRateLimited, fmt.Sprintf("too many kernel calls from %s", c.spec.Name),
		fmt.Sprintf("an instance may make %d kernel calls a second (burst %d)", CallbackRate, CallbackBurst), "slow down; batch reads")
}

func (c *callbacks) caller() policy.Caller { return c.Caller(c.spec, c.instance) }

// request is the policy request of a callback: the plugin runs in its L2
// sandbox (if this kernel sandboxes plugins), so the request says so and a
// rule's require_sandbox sees it; and it carries the peer the instance was
// launched as, so tokens are issued to and checked against it.
func (c *callbacks) request(syscall, path string) policy.Request {
	req := policy.Request{Syscall: syscall, Path: path, Caller: c.caller(), Sandbox: c.Sandbox(c.spec)}
	if c.peer != nil {
		p := c.peer()
		req.Peer = policy.Peer{PID: p.PID, ContainerID: p.ContainerID}
	}
	return req
}

// declared refuses, and audits, a callback for a syscall the plugin did not
// declare in required_capabilities: what it was approved for at install is
// all it gets.
func (c *callbacks) declared(ctx context.Context, syscall, path string) error {
	if slices.Contains(c.spec.Capabilities, syscall) {
		return nil
	}
	why := fmt.Sprintf("plugin %s's manifest does not list %s in required_capabilities (it lists: %s)",
		c.spec.Name, syscall, listOrNone(c.spec.Capabilities))
	c.Audit.Append(ctx, audit.Event{Type: audit.EventSyscall, SyscallType: syscall, Caller: c.spec.Name,
		PolicyDecision: audit.DecisionDenied, DenyReason: why, SandboxID: c.instance, Metadata: map[string]string{audit.MetaPath: path}})
	return uerr.New(CodeCapabilityUndeclared, fmt.Sprintf("%s by %s refused: capability not declared", syscall, c.spec.Name), why,
		fmt.Sprintf("add %s to required_capabilities in the plugin's plugin.yaml and reinstall it (you approve the list at install)", syscall))
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

func (c *callbacks) judge(ctx context.Context, req policy.Request) error {
	t0 := time.Now()
	res := c.Policy.Evaluate(ctx, req)
	c.Audit.RecordDecision(ctx, req, res, time.Since(t0))
	if res.Enforced == policy.Allow {
		return nil
	}
	what := "denied"
	if res.Enforced == policy.RequireReview {
		what = "needs review"
	}
	return uerr.New("POLICY_DENIED", fmt.Sprintf("%s of %s by %s %s", req.Syscall, req.Path, c.spec.Name, what),
		strings.Join(res.Reasons, "; "), "see `fluffy policy explain --syscall "+req.Syscall+" --path "+req.Path+"`")
}

// judgeToken allows req only through the token it presents.
func (c *callbacks) judgeToken(ctx context.Context, req policy.Request) error {
	t0 := time.Now()
	res := c.Policy.Evaluate(ctx, req)
	d := time.Since(t0)
	if res.ByToken && res.Enforced == policy.Allow {
		c.Audit.RecordDecision(ctx, req, res, d)
		return nil
	}
	why := "capability token " + req.Token.ID + ": " + res.TokenStatus
	switch {
	case res.TokenStatus != "":
	case res.Enforced == policy.Allow: // the fast path was not taken (the project root)
		why = "capability token " + req.Token.ID + ": " + token.ScopeMismatch.String()
	default: // valid, but a built-in rule denied or wants review
		why = "capability token " + req.Token.ID + " is valid but " + strings.Join(res.Reasons, "; ")
	}
	ev := router.DecisionEvent(req, res, d)
	ev.PolicyDecision, ev.DenyReason, ev.CapabilityID = audit.DecisionDenied, why, req.Token.ID
	c.Audit.Append(ctx, ev)
	return uerr.New(CodeTokenInvalid, fmt.Sprintf("%s of %s by %s refused: capability token not accepted", req.Syscall, req.Path, c.spec.Name),
		textsafe.Line(why, 300), "request a new token (RequestCapability) for this syscall and path, and use each nonce once, increasing")
}

// RequestCapability issues a token bound to this instance when the policy
// allows the syscall on that exact path outright.
func (c *callbacks) RequestCapability(ctx context.Context, syscall, pathGlob string, maxOps int, ttl time.Duration) (base.Capability, error) {
	if err := c.admit(ctx, "kernel.request_capability"); err != nil {
		return base.Capability{}, err
	}
	if err := c.declared(ctx, syscall, pathGlob); err != nil {
		return base.Capability{}, err
	}
	if ok, first := c.issue.allow(); !ok {
		if first {
			c.Audit.Append(ctx, audit.Event{Type: audit.EventSyscall, SyscallType: "kernel.request_capability", Caller: c.spec.Name,
				PolicyDecision: audit.DecisionDenied, SandboxID: c.instance,
				DenyReason: fmt.Sprintf("rate limited: more than %d capability tokens a second (burst %d) for instance %s; further refusals in this run are not recorded", CapabilityRate, CapabilityBurst, c.instance)})
		}
		return base.Capability{}, uerr.New(CodeRateLimited, fmt.Sprintf("too many capability requests from %s", c.spec.Name),
			fmt.Sprintf("an instance may be issued %d capability tokens a second (burst %d)", CapabilityRate, CapabilityBurst),
			"reuse a token for up to its maxOps operations instead of asking for one per call")
	}
	if pathGlob != "" {
		clean, err := confine.Clean(pathGlob)
		if err != nil {
			return base.Capability{}, err
		}
		pathGlob = clean // as ReadFile will present it
	}
	req := c.request(syscall, pathGlob)
	t0 := time.Now()
	tok, res, err := c.Policy.Issue(ctx, req, token.Scope{Syscall: syscall, MaxOps: maxOps, TTL: ttl})
	c.Audit.RecordDecision(ctx, req, res, time.Since(t0))
	if err != nil {
		return base.Capability{}, err
	}
	if tok.ID == "" {
		return base.Capability{}, uerr.New("POLICY_DENIED", fmt.Sprintf("no capability for %s on %s", syscall, pathGlob),
			strings.Join(res.Reasons, "; "), "capabilities are only issued where the policy allows the syscall outright")
	}
	c.Audit.RecordCapability(ctx, c.spec.Name, c.instance, tok)
	return base.Capability{TokenID: tok.ID, Expires: tok.Expires}, nil
}

// ReadFile reads a file on the plugin's behalf, from the plugin's own
// view of the session (the project with the changeset applied, minus what
// the policy denies it). The path is cleaned and judged as fs.read; when a
// symbolic link leads elsewhere, the path it resolves to is judged too, so
// a link named docs/notes.txt cannot read .env.
//
// With a token (use.TokenID set) the read is allowed only by that token:
// issued to this instance and peer for fs.read on exactly this path,
// unexpired, with operations left and a nonce above the last one. Any
// other token is refused (KERNEL_TOKEN_INVALID) and audited; the read
// does not fall back to the rules, so a plugin learns its token is bad.
func (c *callbacks) ReadFile(ctx context.Context, p string, maxBytes int64, use base.TokenUse) ([]byte, string, error) {
	if err := c.admit(ctx, "kernel.read_file"); err != nil {
		return nil, "", err
	}
	if err := c.declared(ctx, "fs.read", p); err != nil {
		return nil, "", err
	}
	clean, err := confine.Clean(p)
	if err != nil {
		return nil, "", err
	}
	req := c.request("fs.read", clean)
	if use.TokenID != "" {
		req.Token = &token.Use{ID: use.TokenID, Nonce: use.Nonce}
		err = c.judgeToken(ctx, req)
	} else {
		err = c.judge(ctx, req)
	}
	if err != nil {
		return nil, "", err
	}
	root, err := c.Views.ViewRoot(c.spec.Name)
	if err != nil {
		return nil, "", err
	}
	defer root.Close()
	f, canon, err := root.Open(clean)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	if canon != clean {
		// A token covers the path it names, not where a link leads: the
		// target is judged by the rules.
		if err := c.judge(ctx, c.request("fs.read", canon)); err != nil {
			return nil, "", err
		}
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, "", uerr.New("FS_NOT_FILE", clean+" is not a regular file", "only files can be read", "use a file path")
	}
	if maxBytes <= 0 || maxBytes > 8<<20 {
		maxBytes = 8 << 20
	}
	b, err := io.ReadAll(io.LimitReader(f, maxBytes))
	if err != nil {
		return nil, "", err
	}
	h := sha256.Sum256(b)
	return b, hex.EncodeToString(h[:]), nil
}

// ReportProgress passes a plugin's progress line, escaped and bounded, to
// whoever shows progress; over the instance's rate it is dropped.
func (c *callbacks) ReportProgress(_ context.Context, message string, fraction float64) error {
	if ok, _ := c.limit.allow(); !ok {
		return nil // progress is advisory: dropping it is the coalescing
	}
	if c.Progress != nil {
		c.Progress(fmt.Sprintf("plugin %s says: %s", c.spec.Name, textsafe.Line(message, maxProgressLine)))
	}
	return nil
}
