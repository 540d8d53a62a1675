package task_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/pin"
)

// alwaysPolicy is a user's policy file: its comments and layout must
// survive an amendment.
const alwaysPolicy = `# my project's policy — keep this comment
version: 1
mode: enforce

capabilities:
  - name: reads
    match: { syscall: fs.read, path_glob: ["**"] }
    action: allow

  # customers read the docs: every change is looked at
  - name: docs-review
    match:
      syscall: fs.write
      path_glob: ["docs/**"]
    action: require_review
    reason: docs are reviewed   # by a person
`

const alwaysManifest = `name: demo
version: "1.0.0"
kind: tool
description: "demo"
author: "tests"
entry: demo
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
required_capabilities: [fs.write]
tools:
  - name: demo.write
    summary: "write"
    parameters: {type: object, properties: {path: {type: string}}, required: [path]}
    paths: [{arg: path, access: write}]
`

type catalogFunc func(plugin, tool string) (router.Target, error)

func (f catalogFunc) Lookup(p, t string) (router.Target, error) { return f(p, t) }

type dispatchFunc func(call tool.Call) (router.Dispatched, error)

func (f dispatchFunc) Dispatch(_ context.Context, _ string, call tool.Call, _ func(tool.Progress)) (router.Dispatched, error) {
	return f(call)
}

// alwaysFixture is the task runner's review path on a real router, a
// real policy file and a real audit log; the person is the test, answering
// review_requested events as the REPL would through Respond.
type alwaysFixture struct {
	ws     string
	file   string
	tasks  *task.Tasks
	router *router.Router
	log    *audit.Log
	engine *policy.Engine
	events chan agent.Event
	pins   *pin.Store
}

func newAlwaysFixture(t *testing.T) *alwaysFixture {
	t.Helper()
	ws := t.TempDir()
	file := policy.ProjectPath(ws)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(alwaysPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	// The project's file is trusted, as `fluffy policy trust` does it.
	pins := pin.NewStore(t.TempDir())
	if err := pins.Approve(ws, []byte(alwaysPolicy), "test"); err != nil {
		t.Fatal(err)
	}
	p, err := pin.Load(ws, pins)
	if err != nil || p.Unapproved != nil {
		t.Fatalf("the trusted policy is not in force: %v %+v", err, p)
	}
	eng := policy.NewEngine(p, policy.Options{})
	log, err := audit.Open(context.Background(), audit.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	m, err := manifests.Parse("plugin.yaml", []byte(alwaysManifest))
	if err != nil {
		t.Fatal(err)
	}
	cat := catalogFunc(func(_, name string) (router.Target, error) {
		tl, ok := m.Tool(name)
		if !ok {
			return router.Target{}, uerr.New(router.CodeUnknownTool, "no tool "+name, "", "")
		}
		return router.Target{Plugin: "demo", Kind: "tool", Sandbox: "code-executor", Tool: tl}, nil
	})
	disp := dispatchFunc(func(call tool.Call) (router.Dispatched, error) {
		return router.Dispatched{Result: tool.Result{OK: true, Output: json.RawMessage(`{}`)}}, nil
	})
	events := make(chan agent.Event, 256)
	tasks := task.NewReviewTasks(&task.Deps{Policy: eng, Audit: log, Workspace: ws}, file, pins, kernel.Auditor{Log: log}, events)
	f := &alwaysFixture{ws: ws, file: file, pins: pins, tasks: tasks, log: log, engine: eng, events: events,
		router: router.New(router.Options{Catalog: cat, Dispatcher: disp, Policy: eng, Audit: log})}
	return f
}

// call runs demo.write on path; answer is called for each review the call
// raises and returns the person's answer. It returns the reviews seen.
func (f *alwaysFixture) call(t *testing.T, path string, answer func(*agent.ReviewEvent) router.Approval) (router.Result, []*agent.ReviewEvent) {
	t.Helper()
	sess := &router.Session{ID: "s1", Mode: "explore", Caller: "model", Approver: task.ToolApprover(f.tasks)}
	done := make(chan router.Result, 1)
	go func() {
		done <- f.router.Call(context.Background(), sess, router.Call{Tool: "demo.write", Args: json.RawMessage(`{"path":"` + path + `"}`)})
	}()
	var seen []*agent.ReviewEvent
	for {
		select {
		case res := <-done:
			return res, seen
		case ev := <-f.events:
			if ev.Type != agent.EventReviewRequested {
				continue
			}
			seen = append(seen, ev.Review)
			if err := f.tasks.Respond(ev.Review.ID, answer(ev.Review)); err != nil {
				t.Fatalf("Respond: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the call did not finish")
		}
	}
}

func once(*agent.ReviewEvent) router.Approval {
	return router.Approval{Approved: true, Scope: router.ScopeOnce, By: "test"}
}

func TestAlwaysBecomesAReviewedPolicyUpdate(t *testing.T) {
	const except = `- {syscall: fs.write, path_glob: ["/docs/a.md"], plugin: demo}`
	cases := []struct {
		name          string
		approveUpdate bool
	}{
		{"policy update approved", true},
		{"policy update rejected", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newAlwaysFixture(t)
			before, _ := os.ReadFile(f.file)
			res, seen := f.call(t, "docs/a.md", func(rv *agent.ReviewEvent) router.Approval {
				switch rv.Kind {
				case "tool":
					return router.Approval{Approved: true, Scope: router.ScopeAlways, By: "test"}
				case "policy.update":
					// A scope the review does not offer is refused.
					if err := f.tasks.Respond(rv.ID, router.Approval{Approved: true, Scope: router.ScopeAlways}); uerr.From(err).Code != task.CodeScopeUnsupported {
						t.Errorf("answering a policy.update review \"always\" = %v, want %s", err, task.CodeScopeUnsupported)
					}
					return router.Approval{Approved: tc.approveUpdate, By: "test"}
				}
				t.Errorf("unexpected review %q", rv.Kind)
				return router.Approval{}
			})
			if !res.OK {
				t.Fatalf("the call approved \"always\" did not run: %+v", res.Err)
			}
			if len(seen) != 2 || seen[0].Kind != "tool" || seen[1].Kind != "policy.update" {
				t.Fatalf("reviews = %+v, want a tool review, then a policy.update review", seen)
			}
			tr := seen[0]
			if !strings.Contains(strings.Join(tr.Scopes, ","), router.ScopeAlways) || tr.Policy == nil || !strings.Contains(tr.Policy.Rules, except) {
				t.Fatalf("the tool review does not offer \"always\" with its rule: scopes %v, policy %+v", tr.Scopes, tr.Policy)
			}
			pu := seen[1].Policy
			if pu == nil || !strings.Contains(pu.Rules, "rule docs-review (line 11) gains the exception") || !strings.Contains(pu.Rules, except) ||
				!strings.Contains(pu.Diff, "+      "+except) || pu.Trial == nil || pu.File != f.file {
				t.Fatalf("the policy.update review does not show the canonical rule and its trial: %+v", pu)
			}
			if pu.Trial.Replayed == 0 || len(pu.Trial.Changes) == 0 {
				t.Errorf("the trial replayed %d decisions with %d changes, want the call's own from the audit log", pu.Trial.Replayed, len(pu.Trial.Changes))
			}
			for _, c := range pu.Trial.Changes {
				// The replayed call ran sandboxed: the new allow rule
				// (require_sandbox: L2) allows it.
				if !strings.Contains(c, "require_review -> allow") {
					t.Errorf("trial change %q, want require_review -> allow", c)
				}
			}
			after, _ := os.ReadFile(f.file)
			updates, err := f.log.Recent(context.Background(), 10, audit.EventPolicyUpdate)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.approveUpdate {
				if !bytes.Equal(before, after) {
					t.Fatalf("a rejected policy update changed the file:\n%s", after)
				}
				if len(updates) != 1 || updates[0].PolicyDecision != audit.DecisionDenied || updates[0].Metadata["via"] != "review: always" || !strings.Contains(updates[0].Metadata["proposed"], "docs-review") {
					t.Errorf("a rejected policy update must be audited as refused, once: %+v", updates)
				}
				_, seen = f.call(t, "docs/a.md", once)
				if len(seen) != 1 {
					t.Fatalf("after a rejected policy update the same call raised %d reviews, want 1", len(seen))
				}
				return
			}
			if !strings.HasPrefix(string(after), string(before)) || !strings.Contains(string(after), "    reason: docs are reviewed   # by a person\n    except:\n      "+except) {
				t.Fatalf("the policy file is not the old one plus the except item:\n%s", after)
			}
			sum := sha256.Sum256(after)
			if h := hex.EncodeToString(sum[:]); f.engine.Policy().Hash != h {
				t.Errorf("the engine runs policy %s, not the written file %s", f.engine.Policy().Hash, h)
			}
			// The reviewed write is trusted as written: the file stays in
			// force for the next kernel too.
			if p, err := pin.Load(f.ws, f.pins); err != nil || p.Unapproved != nil || p.Hash != hex.EncodeToString(sum[:]) {
				t.Fatalf("the policy written by \"always\" is not trusted: %v %+v", err, p.Unapproved)
			}
			if len(updates) != 1 || updates[0].Metadata["new_hash"] != hex.EncodeToString(sum[:]) || updates[0].Metadata["old_hash"] == "" || updates[0].Metadata["via"] != "review: always" {
				t.Fatalf("policy_update audit records = %+v, want one with the old and new hash", updates)
			}
			res, seen = f.call(t, "docs/a.md", once)
			if len(seen) != 0 || !res.OK {
				t.Fatalf("the call approved \"always\" was reviewed again (%d reviews) or failed: %+v", len(seen), res.Err)
			}
			if _, seen = f.call(t, "docs/b.md", once); len(seen) != 1 {
				t.Fatalf("a write of another path raised %d reviews, want 1", len(seen))
			}
		})
	}
}

func TestAlwaysOnlyWhereThePolicyCanSayIt(t *testing.T) {
	f := newAlwaysFixture(t)
	// The file on disk changed since the kernel loaded it: no "always"
	// (the amendment would be of a policy the user no longer has).
	if err := os.WriteFile(f.file, []byte(alwaysPolicy+"\n# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, seen := f.call(t, "docs/a.md", func(rv *agent.ReviewEvent) router.Approval {
		if strings.Contains(strings.Join(rv.Scopes, ","), router.ScopeAlways) || rv.Policy != nil {
			t.Errorf("\"always\" offered on a policy edited on disk: %v", rv.Scopes)
		}
		err := f.tasks.Respond(rv.ID, router.Approval{Approved: true, Scope: router.ScopeAlways})
		if uerr.From(err).Code != task.CodeScopeUnsupported {
			t.Errorf("Respond always = %v, want %s", err, task.CodeScopeUnsupported)
		}
		return router.Approval{Approved: true, Scope: router.ScopeOnce}
	})
	if len(seen) != 1 {
		t.Fatalf("reviews = %d, want 1", len(seen))
	}
}
