package policy

import (
	"context"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/policy/token"
)

// TestSeedCases: the 26 policy-engine specification cases the engine
// was designed against, numbered as in that specification.
func TestSeedCases(t *testing.T) {
	ctx := context.Background()
	allowRead := `
capabilities:
  - name: read-src
    match: { syscall: fs.read, path_glob: ["src/**"] }
    action: allow
`
	writeAllow := `
capabilities:
  - name: write-src
    match: { syscall: fs.write, path_glob: ["src/**"] }
    action: allow
`
	cases := []struct {
		num  int
		name string
		run  func(t *testing.T)
	}{
		{1, "no rules match -> default deny", func(t *testing.T) {
			e := NewEngine(mustLoad(t, allowRead), Options{})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"})
			if r.Decision != Deny || r.Deciding[0].Layer != LayerDefault || !reasonsContain(r, "no rule explicitly allowed") {
				t.Fatalf("got %+v", r)
			}
		}},
		{2, "only pass rules -> default deny", func(t *testing.T) {
			e := NewEngine(mustLoad(t, `
capabilities:
  - { name: p1, match: { syscall: fs.read }, action: pass }
  - { name: p2, match: { syscall: fs.read, path_glob: ["**"] }, action: pass }
`), Options{})
			r := e.Explain(ctx, Request{Syscall: "fs.read", Path: "src/a.go"})
			if r.Decision != Deny || r.Deciding[0].Layer != LayerDefault {
				t.Fatalf("got %+v", r)
			}
			n := 0
			for _, ev := range r.Trace {
				if ev.Layer == LayerYAML && ev.Matched && ev.Action == Pass {
					n++
				}
			}
			if n != 2 {
				t.Fatalf("want both pass rules to have matched, trace %+v", r.Trace)
			}
		}},
		{3, "one allow + one deny (same syscall) -> deny wins", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow+`
  - { name: no-write, match: { syscall: fs.write }, action: deny, reason: "writes are off" }
`), Options{})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"})
			if r.Decision != Deny || r.DecidingRule() != "no-write" || !reasonsContain(r, "writes are off") {
				t.Fatalf("got %+v", r)
			}
		}},
		{4, "one allow + one require_review -> require_review wins", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow+`
  - { name: review-write, match: { syscall: fs.write }, action: require_review, reason: "look first" }
`), Options{})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"})
			if r.Decision != RequireReview || r.DecidingRule() != "review-write" {
				t.Fatalf("got %+v", r)
			}
		}},
		{5, "deny in extension layer, allow in built-in layer -> deny wins", func(t *testing.T) {
			ext := verdictExt("no", Deny, "extension says no")
			e := NewEngine(mustLoad(t, ""), Options{Extensions: []Extension{ext}})
			e.builtins = append(e.builtins, builtinRule{name: "builtin.test-allow", kind: kindFixed, action: Allow, reason: "built-in allow"})
			r := e.Evaluate(ctx, Request{Syscall: "fs.read", Path: "src/a.go"})
			if r.Decision != Deny || r.Deciding[0].Layer != LayerExtension || ext.calls.Load() != 1 {
				t.Fatalf("allow must not short-circuit: got %+v calls %d", r, ext.calls.Load())
			}
		}},
		{6, "require_review with except, syscall matches except -> pass", func(t *testing.T) {
			e := NewEngine(mustLoad(t, `
capabilities:
  - name: new-employee-review
    match: { syscall: fs.write, caller_tag: ["new_employee"] }
    action: require_review
    except:
      - { path_glob: ["src/tests/**"] }
`+"  - { name: write-all, match: { syscall: fs.write }, action: allow }\n"), Options{})
			r := e.Explain(ctx, Request{Syscall: "fs.write", Path: "src/tests/a_test.go", Caller: Caller{Tags: []string{"new_employee"}}})
			if r.Decision != Allow {
				t.Fatalf("the review rule must pass: got %+v", r)
			}
			for _, ev := range r.Trace {
				if ev.Rule == "new-employee-review" && (ev.Matched || ev.Action != Pass || ev.Note == "") {
					t.Fatalf("rule should pass with an except note: %+v", ev)
				}
			}
		}},
		{7, "valid token + built-in deny -> deny", func(t *testing.T) {
			e := NewEngine(mustLoad(t, ""), Options{Clock: fixedClock(testT0)})
			tok := issueRaw(t, e, token.Scope{Syscall: "fs.write", Paths: []string{".fluffy/**"}, MaxOps: 3})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: ".fluffy/policy.yaml", Caller: fsCaller, Peer: fsPeer, Token: &token.Use{ID: tok.ID, Nonce: 1}})
			// A plugin caller meets the first built-in on .fluffy/ (nothing
			// there is a plugin's); builtin.policy-files would deny it next.
			if r.Decision != Deny || r.ByToken || r.DecidingRule() != "builtin.kernel-dir-private" {
				t.Fatalf("got %+v", r)
			}
		}},
		{8, "valid token + no built-in issues -> allow (skips YAML/extension)", func(t *testing.T) {
			ext := verdictExt("no", Deny, "extension says no")
			e := NewEngine(mustLoad(t, `
capabilities:
  - { name: no-write, match: { syscall: fs.write }, action: deny, reason: "writes are off" }
`), Options{Clock: fixedClock(testT0), Extensions: []Extension{ext}})
			tok := issueRaw(t, e, token.Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 3})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go", Caller: fsCaller, Peer: fsPeer, Token: &token.Use{ID: tok.ID, Nonce: 1}})
			if r.Decision != Allow || !r.ByToken || ext.calls.Load() != 0 {
				t.Fatalf("got %+v, extension calls %d", r, ext.calls.Load())
			}
		}},
		{9, "expired token -> fall through to full evaluation", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow), Options{Clock: fixedClock(testT0.Add(31 * time.Second))})
			tok := issueRaw(t, e, token.Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 3})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go", Caller: fsCaller, Peer: fsPeer, Token: &token.Use{ID: tok.ID, Nonce: 1}})
			if r.Decision != Allow || r.ByToken || r.TokenStatus != token.Expired.String() || r.DecidingRule() != "write-src" {
				t.Fatalf("got %+v", r)
			}
			r = e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "lib/a.go", Caller: fsCaller, Peer: fsPeer, Token: &token.Use{ID: tok.ID, Nonce: 2}})
			if r.Decision != Deny {
				t.Fatalf("full evaluation must apply: %+v", r)
			}
		}},
		{10, "multiple require_review rules -> all reasons aggregated", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow+`
  - { name: r1, match: { syscall: fs.write }, action: require_review, reason: "reason one" }
  - { name: r2, match: { syscall: fs.write, path_glob: ["*.go"] }, action: require_review, reason: "reason two" }
`), Options{Extensions: []Extension{verdictExt("x", RequireReview, "reason three")}})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"})
			if r.Decision != RequireReview || len(r.Reasons) != 3 || !reasonsContain(r, "reason one") || !reasonsContain(r, "reason two") || !reasonsContain(r, "reason three") {
				t.Fatalf("got %+v", r)
			}
		}},
		{11, "YAML deny + extension allow -> deny, extension never executes", func(t *testing.T) {
			ext := verdictExt("yes", Allow, "")
			e := NewEngine(mustLoad(t, `
capabilities:
  - { name: no-write, match: { syscall: fs.write }, action: deny, reason: "writes are off" }
`), Options{Extensions: []Extension{ext}})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"})
			if r.Decision != Deny || ext.calls.Load() != 0 {
				t.Fatalf("got %+v calls %d", r, ext.calls.Load())
			}
			e.Explain(ctx, Request{Syscall: "fs.write", Path: "src/a.go"})
			if ext.calls.Load() != 0 {
				t.Fatal("explain ran the extension after a deny")
			}
		}},
		{12, "partial match (syscall matches, path_glob does not) -> rule does not apply", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow), Options{})
			r := e.Explain(ctx, Request{Syscall: "fs.write", Path: "lib/a.go"})
			if r.Decision != Deny || r.Deciding[0].Layer != LayerDefault {
				t.Fatalf("got %+v", r)
			}
		}},
		{13, "require_review + except does not match -> require_review", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow+`
  - name: rv
    match: { syscall: fs.write }
    action: require_review
    reason: "review"
    except: [ { path_glob: ["tests/**"] } ]
`), Options{})
			if r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"}); r.Decision != RequireReview {
				t.Fatalf("got %+v", r)
			}
		}},
		{14, "require_review + except with multiple conditions, one matches -> pass", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow+`
  - name: rv
    match: { syscall: fs.write, caller_tag: new_employee }
    action: require_review
    reason: "review"
    except:
      - { path_glob: ["src/tests/**"] }
      - { caller_tag: ["trusted_write"] }
`), Options{})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go", Caller: Caller{Tags: []string{"new_employee", "trusted_write"}}})
			if r.Decision != Allow {
				t.Fatalf("got %+v", r)
			}
		}},
		{15, "require_review + except with multiple conditions, none match -> require_review", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow+`
  - name: rv
    match: { syscall: fs.write, caller_tag: new_employee }
    action: require_review
    reason: "review"
    except:
      - { path_glob: ["src/tests/**"] }
      - { caller_tag: ["trusted_write"] }
`), Options{})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go", Caller: Caller{Tags: []string{"new_employee"}}})
			if r.Decision != RequireReview {
				t.Fatalf("got %+v", r)
			}
		}},
		{16, "multiple allow rules, no deny/review -> allow", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow+`
  - { name: write-go, match: { syscall: fs.write, path_glob: ["*.go"] }, action: allow }
`), Options{})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"})
			if r.Decision != Allow || len(r.Deciding) != 2 {
				t.Fatalf("got %+v", r)
			}
		}},
		{17, "cross-layer allow (YAML + extension) -> allow", func(t *testing.T) {
			ext := verdictExt("yes", Allow, "fine by me")
			e := NewEngine(mustLoad(t, writeAllow), Options{Extensions: []Extension{ext}})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"})
			if r.Decision != Allow || len(r.Deciding) != 2 || r.Deciding[1].Layer != LayerExtension {
				t.Fatalf("got %+v", r)
			}
		}},
		{18, "built-in rules empty (defensive) -> system still works", func(t *testing.T) {
			e := NewEngine(mustLoad(t, writeAllow), Options{})
			e.builtins = nil
			if r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"}); r.Decision != Allow {
				t.Fatalf("got %+v", r)
			}
			if r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "lib/a.go"}); r.Decision != Deny {
				t.Fatalf("got %+v", r)
			}
		}},
		{19, "YAML rules file empty -> default deny, only built-ins active", func(t *testing.T) {
			for _, src := range []string{"", "# only a comment\n", "capabilities: []\n", "capabilities:\n"} {
				p := mustLoad(t, src)
				e := NewEngine(p, Options{})
				if r := e.Evaluate(ctx, Request{Syscall: "fs.read", Path: "src/a.go"}); r.Decision != Deny || r.Deciding[0].Layer != LayerDefault {
					t.Fatalf("%q: got %+v", src, r)
				}
				if r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: ".fluffy/policy.yaml"}); r.DecidingRule() != "builtin.policy-files" {
					t.Fatalf("%q: built-ins must stay active: %+v", src, r)
				}
			}
		}},
		{20, "extension sandbox crashes -> default deny + restart attempt", func(t *testing.T) {
			ext := &testExt{name: "crashy", f: func(context.Context, Request) (Verdict, error) { panic("sandbox died") }}
			e := NewEngine(mustLoad(t, writeAllow), Options{Extensions: []Extension{ext}})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"})
			if r.Decision != Deny || r.Deciding[0].Layer != LayerExtension || !reasonsContain(r, "crashed") {
				t.Fatalf("got %+v", r)
			}
			waitFor(t, "restart", func() bool { return ext.restarts.Load() >= 1 })
			e.Close()
		}},
		{21, "token maxOps exhausted -> invalid, fall through", func(t *testing.T) {
			e := NewEngine(mustLoad(t, ""), Options{Clock: fixedClock(testT0)})
			tok := issueRaw(t, e, token.Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 2})
			req := Request{Syscall: "fs.write", Path: "src/a.go", Caller: fsCaller, Peer: fsPeer}
			for i := uint64(1); i <= 3; i++ {
				req.Token = &token.Use{ID: tok.ID, Nonce: i}
				r := e.Evaluate(ctx, req)
				want := Allow
				if i == 3 {
					want = Deny
				}
				if r.Decision != want || (i == 3 && r.TokenStatus != token.Exhausted.String()) {
					t.Fatalf("use %d: got %+v", i, r)
				}
			}
		}},
		{22, "token TTL boundary race -> one time snapshot, no TOCTOU", func(t *testing.T) {
			// The first clock read is 1 ns before expiry; any later read is
			// long after. A single snapshot keeps the token valid.
			expiry := testT0.Add(token.DefaultTTL)
			reads := 0
			clock := func() time.Time {
				reads++
				if reads == 1 {
					return expiry.Add(-time.Nanosecond)
				}
				return expiry.Add(time.Hour)
			}
			ext := verdictExt("no", Deny, "slow path reached")
			e := NewEngine(mustLoad(t, ""), Options{Clock: clock, Extensions: []Extension{ext}})
			tok := issueRaw(t, e, token.Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 2})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go", Caller: fsCaller, Peer: fsPeer, Token: &token.Use{ID: tok.ID, Nonce: 1}})
			if r.Decision != Allow || !r.ByToken || reads != 1 || !r.At.Equal(expiry.Add(-time.Nanosecond)) {
				t.Fatalf("got %+v after %d clock reads", r, reads)
			}
			// Exactly at expiry the token is expired.
			e2 := NewEngine(mustLoad(t, ""), Options{Clock: fixedClock(expiry)})
			tok2 := issueRaw(t, e2, token.Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 2})
			r = e2.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go", Caller: fsCaller, Peer: fsPeer, Token: &token.Use{ID: tok2.ID, Nonce: 1}})
			if r.ByToken || r.TokenStatus != token.Expired.String() {
				t.Fatalf("at expiry: %+v", r)
			}
		}},
		{23, "token container_id mismatch -> invalid", func(t *testing.T) {
			e := NewEngine(mustLoad(t, ""), Options{Clock: fixedClock(testT0)})
			tok := issueRaw(t, e, token.Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: 2})
			r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go", Caller: fsCaller, Peer: Peer{PID: fsPeer.PID, ContainerID: "someone-else"}, Token: &token.Use{ID: tok.ID, Nonce: 1}})
			if r.Decision != Deny || r.ByToken || r.TokenStatus != token.BindingMismatch.String() {
				t.Fatalf("got %+v", r)
			}
		}},
		{24, "unknown syscall type -> default deny", func(t *testing.T) {
			p, _ := Default()
			e := NewEngine(p, Options{})
			r := e.Evaluate(ctx, Request{Syscall: "quantum.entangle", Path: "src/a.go"})
			if r.Decision != Deny || r.Deciding[0].Layer != LayerDefault {
				t.Fatalf("got %+v", r)
			}
		}},
		{25, "path_glob is empty array -> matches no paths, schema warning", func(t *testing.T) {
			p := mustLoad(t, `
capabilities:
  - { name: nothing, match: { syscall: fs.write, path_glob: [] }, action: allow }
`)
			if !hasWarning(p, WarnEmptyList) {
				t.Fatalf("no warning: %+v", p.Warnings)
			}
			e := NewEngine(p, Options{})
			for _, path := range []string{"src/a.go", "a", ".x/y/z"} {
				if r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: path}); r.Decision != Deny {
					t.Fatalf("%s: got %+v", path, r)
				}
			}
		}},
		{26, "match and except identical -> rule never triggers, schema warning", func(t *testing.T) {
			p := mustLoad(t, `
capabilities:
  - name: never
    match: { syscall: fs.write, path_glob: ["src/**"] }
    except: [ { syscall: fs.write, path_glob: ["src/**"] } ]
    action: deny
    reason: "never"
`+"  - { name: write-src, match: { syscall: fs.write, path_glob: [\"src/**\"] }, action: allow }\n")
			if !hasWarning(p, WarnNeverFires) {
				t.Fatalf("no warning: %+v", p.Warnings)
			}
			if r := NewEngine(p, Options{}).Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/a.go"}); r.Decision != Allow {
				t.Fatalf("got %+v", r)
			}
		}},
	}
	if len(cases) != 26 {
		t.Fatalf("the specification has 26 cases, table has %d", len(cases))
	}
	for i, c := range cases {
		if i > 0 && c.num != cases[i-1].num+1 {
			t.Fatalf("case numbers out of sequence at %d", c.num)
		}
		t.Run(fmtCase(c.num, c.name), c.run)
	}
}

func fmtCase(n int, name string) string {
	return "case" + string(rune('0'+n/10)) + string(rune('0'+n%10)) + "_" + name
}
