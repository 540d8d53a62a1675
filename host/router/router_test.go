package router

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/state"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// These tests drive the pipeline with a real policy engine, real manifests
// and a real audit log; only the plugin side (Dispatcher) and the stages
// other modules will provide (gate, approver, scheduler, ingester) are
// small in-test implementations. host/kernel's tests run the same router
// against real plugins in containers.

const demoManifest = `name: demo
version: "1.0.0"
kind: tool
description: "demo"
author: "tests"
entry: demo
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
required_capabilities: [fs.read, fs.write]
tools:
  - name: demo.read
    summary: "read"
    parameters: {type: object, properties: {path: {type: string}}, required: [path], additionalProperties: false}
    paths: [{arg: path, access: read}]
  - name: demo.write
    summary: "write"
    parameters: {type: object, properties: {path: {type: string}, content: {type: string}}, required: [path]}
    paths: [{arg: path, access: write}]
  - name: demo.run
    summary: "run something"
    parameters: {type: object}
  - name: demo.other
    summary: "a tool no rule mentions"
    parameters: {type: object}
`

const demoPolicy = `capabilities:
  - name: reads
    match: {syscall: fs.read, path_glob: ["**", "!secret/"]}
    action: allow
  - name: writes
    match: {syscall: fs.write, path_glob: ["src/**", "docs/**"]}
    action: allow
  - name: docs-review
    match: {syscall: fs.write, path_glob: ["docs/**"]}
    action: require_review
    reason: docs are reviewed
  - name: run
    match: {syscall: demo.run}
    action: allow
  - name: no-writes-while-validating
    match: {syscall: fs.write, state_machine_state: validating}
    action: deny
    reason: nothing is written while validating
sanitize:
  patterns:
    - {name: itk, regex: 'itk_[a-z0-9]{8,}'}
`

type catalogFunc func(plugin, tool string) (Target, error)

func (f catalogFunc) Lookup(p, t string) (Target, error) { return f(p, t) }

type dispatchFunc func(ctx context.Context, plugin string, call tool.Call) (Dispatched, error)

func (f dispatchFunc) Dispatch(ctx context.Context, plugin string, call tool.Call, _ func(tool.Progress)) (Dispatched, error) {
	return f(ctx, plugin, call)
}

type fixture struct {
	r       *Router
	log     *audit.Log
	engine  *policy.Engine
	calls   atomic.Int32
	respond func(call tool.Call) (tool.Result, error)
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	m, err := manifests.Parse("plugin.yaml", []byte(demoManifest))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load("policy.yaml", []byte(demoPolicy))
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.Open(context.Background(), audit.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	f := &fixture{log: log, engine: policy.NewEngine(p, policy.Options{})}
	f.respond = func(call tool.Call) (tool.Result, error) {
		return tool.Result{OK: true, Output: json.RawMessage(`{"echo":` + string(call.Args) + `}`)}, nil
	}
	cat := catalogFunc(func(plugin, name string) (Target, error) {
		tl, ok := m.Tool(name)
		if !ok || (plugin != "" && plugin != "demo") {
			return Target{}, uerr.New(CodeUnknownTool, "no tool "+name, "", "")
		}
		return Target{Plugin: "demo", Kind: "tool", Tags: []string{"core_plugin"}, Sandbox: "code-executor", Capabilities: m.RequiredCapabilities, Tool: tl}, nil
	})
	disp := dispatchFunc(func(_ context.Context, _ string, call tool.Call) (Dispatched, error) {
		f.calls.Add(1)
		res, err := f.respond(call)
		return Dispatched{Result: res, Instance: "demo-1", OutDir: "/tmp/out/demo-1"}, err
	})
	f.r = New(Options{Catalog: cat, Dispatcher: disp, Policy: f.engine, Audit: log})
	return f
}

func (f *fixture) call(sess *Session, name, args string) Result {
	return f.r.Call(context.Background(), sess, Call{Plugin: "demo", Tool: name, Args: json.RawMessage(args)})
}

func (f *fixture) records(t *testing.T, callID string) []audit.Record {
	t.Helper()
	recs, err := f.log.Query(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Record
	for _, r := range recs {
		if r.Metadata[MetaCallID] == callID {
			out = append(out, r)
		}
	}
	return out
}

type gateFunc struct {
	state string
	f     func(tool, path string, write bool) error
}

func (g gateFunc) State() string                               { return g.state }
func (g gateFunc) Allowed(tool, path string, write bool) error { return g.f(tool, path, write) }

type approverFunc func(ReviewRequest) (Approval, error)

func (a approverFunc) Review(_ context.Context, r ReviewRequest) (Approval, error) { return a(r) }

// TestPipelineStages is the table of where a call stops and whether the
// plugin saw it.
func TestPipelineStages(t *testing.T) {
	approve := approverFunc(func(ReviewRequest) (Approval, error) { return Approval{Approved: true, By: "t"}, nil })
	reject := approverFunc(func(ReviewRequest) (Approval, error) { return Approval{Approved: false, Note: "no"}, nil })
	validating := gateFunc{state: "validating", f: func(string, string, bool) error { return nil }}
	closed := gateFunc{state: "test_writing", f: func(tl, p string, w bool) error {
		if w && strings.HasPrefix(p, "src/") {
			return uerr.New("TOOL_UNAVAILABLE", tl+" on "+p+" is not available in test_writing", "write the test first", "use tests/")
		}
		return nil
	}}
	for _, c := range []struct {
		name       string
		sess       *Session
		tool, args string
		code       string
		stage      string
		dispatched bool
	}{
		{"read allowed", nil, "demo.read", `{"path":"src/a.go"}`, "", StageDone, true},
		{"read denied", nil, "demo.read", `{"path":"secret/k"}`, CodePolicyDenied, StagePolicy, false},
		{"schema", nil, "demo.read", `{"path":5}`, CodeArgsInvalid, StageSchema, false},
		{"schema extra field", nil, "demo.read", `{"path":"a","x":1}`, CodeArgsInvalid, StageSchema, false},
		{"unknown tool", nil, "demo.nope", `{}`, CodeUnknownTool, StageLookup, false},
		{"write allowed", nil, "demo.write", `{"path":"src/a.go"}`, "", StageDone, true},
		{"review, nobody to ask", nil, "demo.write", `{"path":"docs/a.md"}`, CodeReviewRequired, StageReview, false},
		{"review approved", &Session{Approver: approve}, "demo.write", `{"path":"docs/a.md"}`, "", StageDone, true},
		{"review rejected", &Session{Approver: reject}, "demo.write", `{"path":"docs/a.md"}`, CodeReviewRejected, StageReview, false},
		{"gate closed", &Session{Gate: closed}, "demo.write", `{"path":"src/a.go"}`, "TOOL_UNAVAILABLE", StageGate, false},
		{"gate open for tests", &Session{Gate: closed}, "demo.write", `{"path":"tests/a_test.go"}`, CodePolicyDenied, StagePolicy, false},
		{"state reaches the policy", &Session{Gate: validating}, "demo.write", `{"path":"src/a.go"}`, CodePolicyDenied, StagePolicy, false},
		{"pathless tool allowed by name", nil, "demo.run", `{}`, "", StageDone, true},
		{"pathless tool, no rule: default deny", nil, "demo.other", `{}`, CodePolicyDenied, StagePolicy, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			res := f.call(c.sess, c.tool, c.args)
			code := ""
			if res.Err != nil {
				code = res.Err.Code
			}
			if code != c.code || res.Stage != c.stage || (f.calls.Load() > 0) != c.dispatched {
				t.Fatalf("code %q stage %q dispatched %v; want %q %q %v (%v)", code, res.Stage, f.calls.Load() > 0, c.code, c.stage, c.dispatched, res.Err)
			}
			var exec, result int
			for _, r := range f.records(t, res.CallID) {
				switch r.EventType {
				case audit.EventToolExecute:
					exec++
				case audit.EventToolResult:
					result++
					if r.Metadata[MetaStage] != c.stage || r.Metadata[MetaErrorCode] != c.code {
						t.Errorf("tool_result stage %q code %q", r.Metadata[MetaStage], r.Metadata[MetaErrorCode])
					}
				}
			}
			if exec != 1 || result != 1 {
				t.Errorf("tool_execute %d, tool_result %d", exec, result)
			}
		})
	}
}

// TestReviewIsAudited: a reviewer's answer is a durable security record,
// and the approver sees the redacted arguments and the policy's reasons.
func TestReviewIsAudited(t *testing.T) {
	f := newFixture(t)
	var seen ReviewRequest
	sess := &Session{ID: "s", Approver: approverFunc(func(r ReviewRequest) (Approval, error) {
		seen = r
		return Approval{Approved: true, Scope: ScopeSession, By: "alice"}, nil
	})}
	res := f.call(sess, "demo.write", `{"path":"docs/a.md","content":"key itk_abcdefgh12"}`)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(seen.Items) != 1 || seen.Items[0].Request.Path != "docs/a.md" || !strings.Contains(strings.Join(seen.Items[0].Result.Reasons, ""), "docs are reviewed") ||
		strings.Contains(string(seen.Args), "itk_abcdefgh12") {
		t.Fatalf("review request: %+v %s", seen.Items, seen.Args)
	}
	var review *audit.Record
	recs := f.records(t, res.CallID)
	for i := range recs {
		if recs[i].EventType == EventToolReview {
			review = &recs[i]
		}
	}
	if review == nil || review.Metadata["approved"] != "true" || review.Metadata["scope"] != ScopeSession || review.Metadata["by"] != "alice" {
		t.Fatalf("review record: %+v", review)
	}
}

type schedFunc func(ctx context.Context, t Task) error

func (f schedFunc) Run(ctx context.Context, t Task) error { return f(ctx, t) }

type ingestFunc func(Output) error

func (f ingestFunc) Ingest(_ context.Context, o Output) error { return f(o) }

// TestSchedulerAndIngest: with a scheduler every dispatch is a task of the
// plugin's template; proposed changes go to the ingester, whose refusal is
// the call's error.
func TestSchedulerAndIngest(t *testing.T) {
	f := newFixture(t)
	var task Task
	f.r.o.Scheduler = schedFunc(func(ctx context.Context, t Task) error {
		task = t
		return t.Run(ctx)
	})
	f.respond = func(call tool.Call) (tool.Result, error) {
		return tool.Result{OK: true, Output: json.RawMessage(`{}`), Changes: []tool.FileChange{{Path: "src/a.go", Mode: "patch", Artifact: "op/a.patch"}}}, nil
	}
	var got Output
	sess := &Session{Ingester: ingestFunc(func(o Output) error { got = o; return nil })}
	res := f.call(sess, "demo.write", `{"path":"src/a.go"}`)
	if res.Err != nil || task.Template != "code-executor" || !strings.HasPrefix(task.Name, "demo/demo.write") {
		t.Fatalf("%v %+v", res.Err, task)
	}
	if got.Dir != "/tmp/out/demo-1" || len(got.Changes) != 1 || got.CallID != res.CallID {
		t.Fatalf("ingested %+v", got)
	}
	sess.Ingester = ingestFunc(func(Output) error {
		return uerr.New("STALE_FILE", "src/a.go changed since it was read", "", "read it again")
	})
	if res := f.call(sess, "demo.write", `{"path":"src/a.go"}`); res.Err == nil || res.Err.Code != "STALE_FILE" || res.Stage != StageIngest {
		t.Fatalf("stale: %+v", res)
	}
}

// TestOutputLimitAndErrors: the kernel's output limit, malformed output,
// and plugin failures (retryable) versus refusals (not).
func TestOutputLimitAndErrors(t *testing.T) {
	f := newFixture(t)
	f.r.o.MaxOutputBytes = 100
	f.respond = func(tool.Call) (tool.Result, error) {
		return tool.Result{OK: true, Output: json.RawMessage(`"` + strings.Repeat("x", 200) + `"`)}, nil
	}
	res := f.call(nil, "demo.run", `{}`)
	if res.Err == nil || res.Err.Code != CodeOutputTooLarge || res.Output != nil {
		t.Fatalf("oversize: %+v", res)
	}
	recs := f.records(t, res.CallID)
	if last := recs[len(recs)-1]; last.Metadata[MetaOutputBytes] != "202" || last.Metadata[MetaOutputSHA256] == "" {
		t.Fatalf("oversize audit: %+v", last.Metadata)
	}
	f.respond = func(tool.Call) (tool.Result, error) {
		return tool.Result{OK: true, Output: json.RawMessage(`{"a":`)}, nil
	}
	if res := f.call(nil, "demo.run", `{}`); res.Err == nil || res.Err.Code != CodeOutputInvalid {
		t.Fatalf("invalid output: %+v", res)
	}
	f.respond = func(tool.Call) (tool.Result, error) {
		return tool.Result{}, uerr.New("PLUGIN_CRASHED", "plugin demo failed during a call", "", "")
	}
	if res := f.call(nil, "demo.run", `{}`); res.Err == nil || res.Err.Code != "PLUGIN_CRASHED" || !res.Retryable {
		t.Fatalf("crash: %+v", res)
	}
	f.respond = func(tool.Call) (tool.Result, error) { return tool.Result{}, errors.New("boom") }
	if res := f.call(nil, "demo.run", `{}`); res.Err == nil || res.Err.Code != "TOOL_DISPATCH_FAILED" {
		t.Fatalf("plain error: %+v", res)
	}
	if res := f.call(nil, "demo.read", `{"path":"secret/x"}`); res.Retryable {
		t.Fatal("a refusal must not be retryable")
	}
}

// TestSanitize: secrets are redacted inside JSON strings and keys, the JSON
// stays valid (even with a private key that has no END line), numbers keep
// their spelling, and output without secrets is passed through untouched.
func TestSanitize(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		in      string
		want    []string
		wantNot []string
		n       int
	}{
		{`{"a":1.50,"b":"plain"}`, []string{`{"a":1.50,"b":"plain"}`}, nil, 0},
		{`{"k":"sk-abcdefghijklmnop","n":12345678901234567890}`, []string{"sk-[REDACTED]", "12345678901234567890"}, []string{"abcdefghijklmnop"}, 1},
		{`{"pem":"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n","after":"x"}`, []string{"[REDACTED PRIVATE KEY]", `"after":"x"`}, []string{"MIIE"}, 1},
		{`{"itk_abcdefgh12":["itk_00000000aa", 1]}`, []string{"[REDACTED:itk]"}, []string{"itk_abcdefgh12", "itk_00000000aa"}, 2},
	} {
		out, n, err := f.r.sanitize(json.RawMessage(c.in))
		if err != nil || !json.Valid(out) || n != c.n {
			t.Errorf("%s: %s %d %v", c.in, out, n, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: %s lacks %s", c.in, out, w)
			}
		}
		for _, w := range c.wantNot {
			if strings.Contains(string(out), w) {
				t.Errorf("%s: %s still holds %s", c.in, out, w)
			}
		}
	}
	// A plugin's error text is redacted too.
	f.respond = func(tool.Call) (tool.Result, error) {
		return tool.Result{Err: uerr.New("X", "failed with sk-abcdefghijklmnop", "itk_abcdefgh12 leaked", "")}, nil
	}
	res := f.call(nil, "demo.run", `{}`)
	if res.Err == nil || strings.Contains(res.Err.Error(), "abcdefghijklmnop") || strings.Contains(res.Err.Error(), "itk_abcdefgh12") || res.Redactions != 2 {
		t.Fatalf("error not redacted: %v (%d)", res.Err, res.Redactions)
	}
}

// TestRequests: how a call is judged — one request per path, one for the
// tool; the tool request of a tool with paths is advisory.
func TestRequests(t *testing.T) {
	m, _ := manifests.Parse("plugin.yaml", []byte(demoManifest))
	tl, _ := m.Tool("demo.write")
	paths, _ := tl.PathArgs([]byte(`{"path":"src/a.go"}`))
	js := Requests(Target{Plugin: "demo", Kind: "tool", Tags: []string{"x"}, Sandbox: "code-executor", Tool: tl}, &Session{Mode: "strict"}, "code_writing", paths)
	if len(js) != 2 || js[0].Request.Syscall != "demo.write" || !js[0].Advisory || js[1].Request.Syscall != "fs.write" || js[1].Request.Path != "src/a.go" ||
		js[1].Request.Sandbox != "code-executor" || js[1].Request.State != "code_writing" || js[1].Request.SessionMode != "strict" || js[1].Request.Caller.Plugin != "demo" {
		t.Fatalf("%+v", js)
	}
}

// TestGateReview: the workflow machine's "review required" (debug mode) is
// not a refusal: the approver decides, with the gate's reason.
func TestGateReview(t *testing.T) {
	f := newFixture(t)
	debug := gateFunc{state: "exploring", f: func(tl, p string, w bool) error {
		return &state.ReviewRequiredError{Tool: tl, State: "exploring", Mode: "debug", Reason: "debug mode runs are reviewed"}
	}}
	if res := f.call(&Session{Gate: debug}, "demo.run", `{}`); res.Err == nil || res.Err.Code != CodeReviewRequired || !strings.Contains(res.Err.Why, "debug mode runs are reviewed") {
		t.Fatalf("no approver: %+v", res.Err)
	}
	var reasons []string
	approve := approverFunc(func(r ReviewRequest) (Approval, error) { reasons = r.Reasons; return Approval{Approved: true}, nil })
	if res := f.call(&Session{Gate: debug, Approver: approve}, "demo.run", `{}`); res.Err != nil || len(reasons) != 1 {
		t.Fatalf("approved: %+v %v", res.Err, reasons)
	}
}
