package policyverbs

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/pin"
)

// The engine's values the verbs hand to their caller, named here so that
// a CLI renders them without importing the engine.
type (
	Policy   = policy.Policy
	Request  = policy.Request
	Result   = policy.Result
	Builtin  = policy.BuiltinInfo
	Proposal = policy.Proposal
)

// Decisions a caller tells apart.
const (
	Allow         = policy.Allow
	RequireReview = policy.RequireReview
)

// CodeRead: a policy file cannot be read.
const CodeRead = policy.CodeRead

// Verbs act on the policies of one $FLUFFY_HOME's projects.
type Verbs struct {
	home string
	log  hclog.Logger
}

// New returns the verbs of home; log hears the engine.
func New(home string, log hclog.Logger) Verbs {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return Verbs{home: home, log: log}
}

// ProjectPath is <project>/.fluffy/policy.yaml.
func ProjectPath(project string) string { return policy.ProjectPath(project) }

// Builtins are the built-in rules, always first.
func Builtins() []Builtin { return policy.Builtins() }

// LoadFile loads and validates a policy file.
func LoadFile(path string) (*Policy, error) { return policy.LoadFile(path) }

// Active loads the project's policy file when its content is the one
// approved in $FLUFFY_HOME, else the embedded default (p.Unapproved says
// why).
func (v Verbs) Active(project string) (*Policy, error) {
	return pin.Load(project, pin.NewStore(v.home))
}

// Explanation is a request judged by the project's active policy.
type Explanation struct {
	Policy *Policy
	Result Result
	// PathClass is the class of the request's path (source or test).
	PathClass string
}

// Explain judges req under the project's active policy, with the trace of
// every rule.
func (v Verbs) Explain(ctx context.Context, project string, req Request) (Explanation, error) {
	p, err := v.Active(project)
	if err != nil {
		return Explanation{}, err
	}
	eng := policy.NewEngine(p, policy.Options{Logger: v.log})
	defer eng.Close()
	x := Explanation{Policy: p, Result: eng.Explain(ctx, req), PathClass: string(policy.PathClassSource)}
	if req.Path != "" && p.Tests.IsTest(req.Path) {
		x.PathClass = string(policy.PathClassTest)
	}
	return x, nil
}

// AIWrites is what the project's active policy decides for an AI write of
// each path through the L2 sandbox (in strict mode), in order.
func (v Verbs) AIWrites(ctx context.Context, project string, paths []string) (*Policy, []Result, error) {
	p, err := v.Active(project)
	if err != nil {
		return nil, nil, err
	}
	eng := policy.NewEngine(p, policy.Options{Logger: v.log})
	defer eng.Close()
	out := make([]Result, 0, len(paths))
	for _, path := range paths {
		out = append(out, eng.Evaluate(ctx, policy.Request{Syscall: "fs.write", Path: path, Sandbox: "code-executor", SessionMode: "strict",
			Caller: policy.Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool", Tags: []string{"core_plugin"}}}))
	}
	return p, out, nil
}

// Update is a prepared `policy update`: the trial run of a new file
// against the project's recorded decisions, waiting for its review.
type Update struct {
	project string
	home    string
	// Gate is the current policy's answer to policy.update: why a review
	// is required.
	Gate     Result
	Proposal *Proposal
	auditor  kernel.Auditor
	log      *audit.Log
}

// PrepareUpdate gates and trial-runs content (read from file) against the
// project's policy. The trial replays the project's last recorded
// decisions from its audit log; a project with none (or a log held by a
// running kernel) replays what the current policy decides for its own
// examples instead, and note hears why the log is not used.
func (v Verbs) PrepareUpdate(ctx context.Context, project, file string, content []byte, note func(what string)) (*Update, error) {
	current, err := v.Active(project)
	if err != nil {
		return nil, err
	}
	engine := policy.NewEngine(current, policy.Options{Logger: v.log})
	defer engine.Close()
	u := &Update{project: project, home: v.home}
	u.Gate = engine.Evaluate(ctx, policy.Request{Syscall: "policy.update", Caller: policy.Caller{Kind: "user"}})
	if u.Gate.Decision == policy.Deny {
		return nil, uerr.New("POLICY_UPDATE_DENIED", "policy update denied", strings.Join(u.Gate.Reasons, "; "), "")
	}
	var src policy.DecisionSource = exampleDecisions(ctx, engine, current)
	if log, err := audit.Open(ctx, audit.Options{Dir: store.DefaultDir(project), Logger: v.log}); err != nil {
		note(uerr.From(err).What)
	} else {
		u.log = log
		u.auditor = kernel.Auditor{Log: log, Logger: v.log}
		if recs, err := u.auditor.RecentDecisions(policy.TrialSize); err == nil && len(recs) > 0 {
			src = u.auditor
		}
	}
	if u.Proposal, err = policy.Prepare(file, content, src); err != nil {
		u.Close()
		return nil, err
	}
	return u, nil
}

// Apply writes the reviewed update to the project's policy file, pins it
// as trusted (a reviewed update approves the content it writes) and
// records it. A confirmation phrase that does not match is refused with
// why. It returns the file written.
func (u *Update) Apply(ctx context.Context, confirm string) (string, error) {
	target := ProjectPath(u.project)
	prop := u.Proposal
	if want := prop.ConfirmPhrase(); want != "" && confirm != want {
		return target, policy.Commit(target, prop, confirm, nil) // refuses, and says why
	}
	if err := pin.NewStore(u.home).Written(u.project, prop.Policy.Content, "fluffy policy update", func() error {
		return policy.Commit(target, prop, confirm, nil)
	}); err != nil {
		return target, err
	}
	if err := u.auditor.RecordPolicyUpdate(ctx, target, prop.Replayed, len(prop.Changes), prop.Breaking); err != nil {
		return target, fmt.Errorf("policy updated but not recorded in the audit log: %w", err)
	}
	return target, nil
}

// Close releases the audit log.
func (u *Update) Close() {
	if u.log != nil {
		u.log.Close()
		u.log = nil
	}
}

// exampleDecisions records what the current policy decides for every
// example and counter-example in it (the trial set without an audit log).
func exampleDecisions(ctx context.Context, engine *policy.Engine, p *policy.Policy) *policy.MemoryDecisions {
	src := policy.NewMemoryDecisions(policy.TrialSize)
	for _, req := range p.ExampleRequests() {
		res := engine.Evaluate(ctx, req)
		src.Record(policy.RecordedDecision{Request: req, Decision: res.Decision, Rule: res.DecidingRule(), At: res.At})
	}
	return src
}
