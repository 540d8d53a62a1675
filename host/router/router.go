package router

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/toolcall"
	"github.com/fluffy-waffle/fluffy/lib/redact"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// Defaults of Options.
const (
	// DefaultMaxOutputBytes is the largest tool output the kernel accepts
	// (the conformance suite's MaxToolOutputBytes: half of gRPC's default
	// 4 MiB message, so a result and its metadata fit one frame).
	DefaultMaxOutputBytes = 2 << 20
	// DefaultMaxArgsBytes is the largest argument document a call may send.
	DefaultMaxArgsBytes = 2 << 20
)

// Error codes of refused or failed calls; callers and tests branch on them.
const (
	CodeUnknownTool    = "TOOL_UNKNOWN"
	CodeArgsTooLarge   = "TOOL_ARGS_TOO_LARGE"
	CodeArgsInvalid    = "TOOL_ARGS_INVALID" // same code as manifests.CodeToolArgsInvalid
	CodeUnavailable    = "TOOL_UNAVAILABLE"
	CodePolicyDenied   = "POLICY_DENIED"
	CodeReviewRequired = "REVIEW_REQUIRED"
	CodeReviewRejected = "REVIEW_REJECTED"
	CodeOutputTooLarge = "TOOL_OUTPUT_TOO_LARGE"
	CodeOutputInvalid  = "TOOL_OUTPUT_INVALID"
	CodeIngestFailed   = "TOOL_INGEST_FAILED"
)

// Stages, as reported in Result.Stage and the audit records.
const (
	StageLookup   = "lookup"
	StageSchema   = "schema"
	StageGate     = "gate"
	StagePolicy   = "policy"
	StageReview   = "review"
	StageDispatch = "dispatch"
	StageOutput   = "output"
	StageIngest   = "ingest"
	StageDone     = "done"
)

// Options are the router's kernel-wide dependencies.
type Options struct {
	Catalog    Catalog
	Dispatcher Dispatcher
	Policy     PolicyEngine
	Audit      Recorder
	// Scheduler, when set, runs every dispatch as a task; nil runs it at once.
	Scheduler Scheduler
	// Redactor removes known secret prefixes; nil builds one.
	Redactor *redact.Redactor
	// MaxOutputBytes bounds a tool's output (default DefaultMaxOutputBytes).
	MaxOutputBytes int
	// MaxArgsBytes bounds a call's arguments (default DefaultMaxArgsBytes).
	MaxArgsBytes int
	Logger       hclog.Logger
	Now          func() time.Time
}

// Router runs tool calls. It is safe for concurrent use.
type Router struct {
	o   Options
	log hclog.Logger
}

// New returns a router. Catalog, Dispatcher and Policy are required.
func New(o Options) *Router {
	if o.Redactor == nil {
		o.Redactor = redact.New()
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if o.MaxArgsBytes <= 0 {
		o.MaxArgsBytes = DefaultMaxArgsBytes
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Router{o: o, log: o.Logger.Named("router")}
}

// Session is who a call is made for. Its consumer stages are optional.
type Session struct {
	ID   string
	Mode string // strict, explore, debug (the policy's session_mode)
	// Caller names who asked for the call in the audit log: "user" for
	// `fluffy plugin call`, "model" for the agent loop.
	Caller   string
	Gate     Gate
	Approver Approver
	Ingester Ingester
}

// Call is one tool call.
type Call struct {
	// ID identifies the call in results and audit records; empty = generated.
	ID string
	// Plugin may be empty: the tool is then looked up by name alone.
	Plugin string
	Tool   string
	Args   json.RawMessage
	// Progress receives the plugin's progress events (API v2).
	Progress func(tool.Progress)
}

// Result is what the caller (and the model) gets back. Every failure is a
// structured Err; the router never returns raw plugin bytes that were not
// checked and sanitized.
type Result struct {
	CallID string
	Plugin string
	Tool   string
	OK     bool
	// Output is the tool's JSON output, sanitized.
	Output    json.RawMessage
	Changes   []tool.FileChange
	Cancelled bool
	Err       *uerr.Error
	// Retryable tells the model whether the same call may succeed later
	// (a plugin crash or timeout) or not (a refusal, bad arguments).
	Retryable bool
	// Stage is where the call ended (StageDone when it ran).
	Stage string
	// Redactions counts the secrets removed from the output.
	Redactions int
	Instance   string
	OutDir     string
	Duration   time.Duration
	// Normalized lists what the router repaired in the call before
	// judging it (the tool name, wrapped arguments); it is audited.
	Normalized []string
}

// callState carries one call through the pipeline.
type callState struct {
	sess   *Session
	call   Call
	start  time.Time
	target Target
	res    Result
	// review is the approval, when the policy asked for one.
	review *Approval
	// origHash/origLen describe the output before sanitizing.
	origHash string
	origLen  int
}

// Call runs one tool call through the whole pipeline. It always returns a
// Result; a refused or failed call has Err set and leaves the same
// tool_execute and tool_result audit records as a successful one.
func (r *Router) Call(ctx context.Context, sess *Session, c Call) Result {
	if sess == nil {
		sess = &Session{}
	}
	if c.ID == "" {
		c.ID = newCallID()
	}
	cs := &callState{sess: sess, call: c, start: r.o.Now()}
	cs.res = Result{CallID: c.ID, Plugin: c.Plugin, Tool: c.Tool}
	r.recordExecute(ctx, cs)
	// Arguments wrapped in a JSON string or a markdown fence are the
	// object they hold; the record above keeps what was sent.
	if len(c.Args) <= r.o.MaxArgsBytes {
		if obj, how, ok := toolcall.UnwrapArgs(c.Args); ok {
			cs.call.Args = obj
			cs.res.Normalized = append(cs.res.Normalized, how...)
		}
	}
	r.run(ctx, cs)
	cs.res.Duration = r.o.Now().Sub(cs.start)
	r.recordResult(ctx, cs)
	return cs.res
}

// fail ends the call at stage with err.
func (cs *callState) fail(stage string, err *uerr.Error, retryable bool) {
	cs.res.Stage, cs.res.Err, cs.res.Retryable, cs.res.OK = stage, err, retryable, false
}

func (r *Router) run(ctx context.Context, cs *callState) {
	c := cs.call
	// 1. lookup
	t, err := r.lookup(cs)
	c = cs.call
	if err != nil {
		ue, ok := uerr.As(err)
		if !ok {
			ue = uerr.Wrap(err, CodeUnknownTool, fmt.Sprintf("no tool %q", c.Tool), err.Error(), "list the tools with `fluffy plugin info PLUGIN`")
		}
		cs.fail(StageLookup, ue, false)
		return
	}
	cs.target, cs.res.Plugin = t, t.Plugin
	// 2. schema, by the kernel: bad arguments never reach the plugin.
	if len(c.Args) > r.o.MaxArgsBytes {
		cs.fail(StageSchema, uerr.New(CodeArgsTooLarge, fmt.Sprintf("arguments for tool %q are %d bytes", c.Tool, len(c.Args)),
			fmt.Sprintf("the kernel accepts at most %d bytes of arguments per call", r.o.MaxArgsBytes),
			"send smaller arguments (split the work into several calls)"), false)
		return
	}
	if err := t.Tool.ValidateArgs(c.Args); err != nil {
		cs.fail(StageSchema, uerr.From(err), false)
		return
	}
	paths, err := t.Tool.PathArgs(c.Args)
	if err != nil {
		cs.fail(StageSchema, uerr.From(err), false)
		return
	}
	// 3. the workflow state gate.
	gateReviews, ue := r.gate(cs, paths)
	if ue != nil {
		cs.fail(StageGate, ue, false)
		return
	}
	// 4. the policy, and review when it or the gate asks for one.
	if stage, ue := r.judge(ctx, cs, paths, gateReviews); ue != nil {
		cs.fail(stage, ue, false)
		return
	}
	// 5. dispatch, through the scheduler when there is one.
	d, err := r.dispatch(ctx, cs)
	cs.res.Instance, cs.res.OutDir = d.Instance, d.OutDir
	if err != nil {
		ue, _ := uerr.As(err)
		retry := true
		if ue == nil {
			ue = uerr.Wrap(err, "TOOL_DISPATCH_FAILED", fmt.Sprintf("tool %s of %s could not run", c.Tool, t.Plugin), err.Error(), "retry; if it keeps failing see the plugin's log (FLUFFY_LOG_LEVEL=debug)")
		}
		if errors.Is(err, context.Canceled) {
			retry = false
		}
		cs.fail(StageDispatch, ue, retry)
		return
	}
	// 6. the kernel's own output limit, before anything else looks at it.
	pr := d.Result
	cs.origLen = len(pr.Output)
	sum := sha256.Sum256(pr.Output)
	cs.origHash = hex.EncodeToString(sum[:])
	if len(pr.Output) > r.o.MaxOutputBytes {
		cs.fail(StageOutput, uerr.New(CodeOutputTooLarge, fmt.Sprintf("tool %s of %s returned %d bytes", c.Tool, t.Plugin, len(pr.Output)),
			fmt.Sprintf("the kernel accepts at most %d bytes of output per call; the output was discarded", r.o.MaxOutputBytes),
			"ask for less (a line range, a narrower search), or fix the plugin to page its output"), false)
		return
	}
	if len(pr.Output) > 0 && !json.Valid(pr.Output) {
		cs.fail(StageOutput, uerr.New(CodeOutputInvalid, fmt.Sprintf("tool %s of %s returned output that is not JSON", c.Tool, t.Plugin),
			"tool output must be one JSON value", "report this to the plugin's author"), false)
		return
	}
	// 7. ingest proposed changes into the session's changeset. A tool
	// that declares its write paths may change only those: the gate and
	// the policy judged them, and no other path, before the call.
	if ue := unjudgedChange(t, paths, pr.Changes); ue != nil {
		cs.fail(StageOutput, ue, false)
		return
	}
	if ue := r.judgeChanges(ctx, cs, pr.Changes); ue != nil {
		cs.fail(StageOutput, ue, false)
		return
	}
	if cs.sess.Ingester != nil && len(pr.Changes) > 0 {
		if err := cs.sess.Ingester.Ingest(ctx, Output{Plugin: t.Plugin, Tool: c.Tool, CallID: c.ID, Dir: d.OutDir, Changes: pr.Changes}); err != nil {
			ue, ok := uerr.As(err)
			if !ok {
				ue = uerr.Wrap(err, CodeIngestFailed, "the proposed changes were not taken", err.Error(), "read the files again and redo the change")
			}
			cs.fail(StageIngest, ue, false)
			return
		}
	}
	// 8. sanitize: redact secrets from everything the model will read.
	out, n, err := r.sanitize(pr.Output)
	if err != nil {
		cs.fail(StageOutput, uerr.Wrap(err, CodeOutputInvalid, fmt.Sprintf("tool %s of %s returned output that cannot be sanitized", c.Tool, t.Plugin), err.Error(), "report this to the plugin's author"), false)
		return
	}
	cs.res.Output, cs.res.Redactions = out, n
	cs.res.Changes, cs.res.Cancelled = pr.Changes, pr.Cancelled
	cs.res.Stage, cs.res.OK = StageDone, pr.OK && pr.Err == nil
	if pr.Err != nil {
		cs.res.Err = r.sanitizeError(pr.Err, &cs.res.Redactions)
	}
}

// unjudgedChange refuses a proposed change of a path the call's judged
// write paths do not name, when the tool declares write paths at all.
func unjudgedChange(t Target, paths []pathArg, changes []tool.FileChange) *uerr.Error {
	declared := false
	for _, pd := range t.Tool.Paths {
		declared = declared || pd.Write()
	}
	if !declared || len(changes) == 0 {
		return nil
	}
	judged := map[string]bool{}
	for _, p := range paths {
		if p.Write {
			judged[path.Clean(p.Value)] = true
		}
	}
	for _, ch := range changes {
		if !judged[path.Clean(ch.Path)] {
			return uerr.New(CodeOutputInvalid, fmt.Sprintf("tool %s of %s proposed a change to %s, which the call did not name", t.Tool.Name, t.Plugin, textsafe.Line(ch.Path, 200)),
				"a tool may change only the write paths the kernel judged before the call; nothing of this call was taken",
				"report this to the plugin's author")
		}
	}
	return nil
}

// lookup finds the call's tool. A name that is not a tool but spells
// exactly one tool another way (fs_read, functions.fs.read, fs.Read) is
// taken as that tool; two or more matches are refused as ambiguous.
func (r *Router) lookup(cs *callState) (Target, error) {
	c := cs.call
	t, err := r.o.Catalog.Lookup(c.Plugin, c.Tool)
	if err == nil || !uerr.HasCode(err, CodeUnknownTool) {
		return t, err
	}
	var found []Target
	var names []string
	for _, n := range toolcall.NameCandidates(c.Tool) {
		ct, cerr := r.o.Catalog.Lookup(c.Plugin, n)
		if cerr != nil {
			continue
		}
		if ct.Tool.Name == "" {
			ct.Tool.Name = n
		}
		if !slices.Contains(names, n) {
			found, names = append(found, ct), append(names, n)
		}
	}
	switch len(found) {
	case 0:
		return t, err
	case 1:
		cs.res.Normalized = append(cs.res.Normalized, fmt.Sprintf("tool name %q is %s", textsafe.Line(c.Tool, 80), names[0]))
		cs.call.Tool, cs.res.Tool = names[0], names[0]
		return found[0], nil
	}
	return Target{}, uerr.New(CodeUnknownTool, fmt.Sprintf("no tool is named %q; it could be any of %s", textsafe.Line(c.Tool, 80), strings.Join(names, ", ")),
		"the name matches several tools once spelled another way", "call the tool by its exact name")
}

func (r *Router) dispatch(ctx context.Context, cs *callState) (Dispatched, error) {
	t, c := cs.target, cs.call
	tc := tool.Call{ID: c.ID, Tool: c.Tool, Args: c.Args, SessionID: cs.sess.ID, SessionMode: cs.sess.Mode, OperationID: c.ID}
	var d Dispatched
	run := func(ctx context.Context) error {
		var err error
		d, err = r.o.Dispatcher.Dispatch(ctx, t.Plugin, tc, c.Progress)
		return err
	}
	if r.o.Scheduler == nil {
		return d, run(ctx)
	}
	err := r.o.Scheduler.Run(ctx, Task{Name: t.Plugin + "/" + c.Tool + " " + c.ID, Plugin: t.Plugin, Tool: c.Tool, Template: t.Sandbox, Light: LightCall(t), Run: run})
	return d, err
}

// gate asks the workflow machine, once per path (or once for the tool).
// An error with a Review method (host/state's ReviewRequiredError) is not
// a refusal: its reason joins the policy's review reasons and the
// approver decides.
func (r *Router) gate(cs *callState, paths []pathArg) ([]string, *uerr.Error) {
	g := cs.sess.Gate
	if g == nil {
		return nil, nil
	}
	var reviews []string
	check := func(path string, write bool) *uerr.Error {
		err := g.Allowed(cs.call.Tool, path, write)
		if err == nil {
			return nil
		}
		var rr reviewRequired
		if errors.As(err, &rr) {
			st, mode, reason := rr.Review()
			reviews = append(reviews, fmt.Sprintf("workflow (%s, %s mode): %s", st, mode, reason))
			return nil
		}
		if ue, ok := uerr.As(err); ok {
			return ue
		}
		return uerr.Wrap(err, CodeUnavailable, fmt.Sprintf("tool %s is not available now", cs.call.Tool), err.Error(), "use one of the tools the workflow allows in this state")
	}
	if len(paths) == 0 {
		return reviews, check("", false)
	}
	for _, p := range paths {
		if ue := check(p.Value, p.Write); ue != nil {
			return nil, ue
		}
	}
	return reviews, nil
}

// reviewRequired is the gate's "needs a human review" answer, declared
// here so the router depends on the behaviour, not on host/state.
type reviewRequired interface {
	error
	Review() (state, mode, reason string)
}

func newCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "call-" + hex.EncodeToString(b[:])
}
