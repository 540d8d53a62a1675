package policy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/policy/token"
)

func TestExtensionFailuresDenyAndRestart(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	cases := []struct {
		name string
		f    func(ctx context.Context, req Request) (Verdict, error)
		want string
	}{
		{"panic", func(context.Context, Request) (Verdict, error) { panic("boom") }, "crashed"},
		{"hang past deadline ignoring ctx", func(context.Context, Request) (Verdict, error) {
			<-release
			return Verdict{Action: Allow}, nil
		}, "did not answer within 100ms"},
		{"slow but ctx-aware", func(ctx context.Context, _ Request) (Verdict, error) {
			select {
			case <-ctx.Done():
				return Verdict{}, ctx.Err()
			case <-time.After(time.Second):
				return Verdict{Action: Allow}, nil
			}
		}, "extension"},
		{"error", func(context.Context, Request) (Verdict, error) { return Verdict{}, errors.New("rpc: broken pipe") }, "broken pipe"},
		{"malformed action", func(context.Context, Request) (Verdict, error) { return Verdict{Action: Action(42)}, nil }, "malformed"},
		{"deny without reason", func(context.Context, Request) (Verdict, error) { return Verdict{Action: Deny}, nil }, "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ext := &testExt{name: "x", f: c.f}
			e := NewEngine(mustLoad(t, `
capabilities:
  - { name: write-src, match: { syscall: fs.write, path_glob: ["src/**"] }, action: allow }
`), Options{Extensions: []Extension{ext}})
			start := time.Now()
			r := e.Evaluate(context.Background(), Request{Syscall: "fs.write", Path: "src/a.go"})
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("evaluation took %v: the deadline did not hold", el)
			}
			if r.Decision != Deny || r.Deciding[0].Layer != LayerExtension || !reasonsContain(r, c.want) {
				t.Fatalf("got %+v", r)
			}
			waitFor(t, "restart", func() bool { return ext.restarts.Load() == 1 })
			e.Close()
			if st := e.Extensions(); st[0].Failures != 1 || st[0].Restarts != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestExtensionWarmAndPass(t *testing.T) {
	good := verdictExt("good", Pass, "")
	bad := &testExt{name: "bad", f: func(context.Context, Request) (Verdict, error) { panic("cold start failed") }}
	e := NewEngine(nil, Options{Extensions: []Extension{good, bad}})
	err := e.Warm(context.Background(), time.Second)
	if err == nil || !strings.Contains(err.Error(), "bad") || strings.Contains(err.Error(), "good") {
		t.Fatalf("warm: %v", err)
	}
	if good.calls.Load() != 1 || bad.calls.Load() != 1 {
		t.Fatal("warm-up did not call every extension")
	}
	waitFor(t, "restart", func() bool { return bad.restarts.Load() == 1 })
	e.Close()
}

func TestObserveMode(t *testing.T) {
	p := mustLoad(t, `
mode: observe
capabilities:
  - { name: no-write, match: { syscall: fs.write, path_glob: ["lib/**"] }, action: deny, reason: "lib is frozen" }
  - { name: review-docs, match: { syscall: fs.write, path_glob: ["*.md"] }, action: require_review, reason: "docs" }
`)
	e := NewEngine(p, Options{})
	ctx := context.Background()
	r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "lib/a.go"})
	if r.Decision != Deny || r.Enforced != Allow || !r.WouldDeny {
		t.Fatalf("yaml deny in observe mode: %+v", r)
	}
	r = e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "other/a.go"})
	if r.Decision != Deny || r.Enforced != Allow || !r.WouldDeny {
		t.Fatalf("default deny in observe mode: %+v", r)
	}
	r = e.Evaluate(ctx, Request{Syscall: "fs.write", Path: ".fluffy/policy.yaml"})
	if r.Enforced != Deny || r.WouldDeny {
		t.Fatalf("built-in deny must be enforced in observe mode: %+v", r)
	}
	r = e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "README.md"})
	if r.Enforced != RequireReview {
		t.Fatalf("review stays in observe mode: %+v", r)
	}
}

func TestBuiltins(t *testing.T) {
	if n := len(builtinRules()); n > MaxBuiltins {
		t.Fatalf("%d built-in rules, the design allows at most %d", n, MaxBuiltins)
	}
	e := NewEngine(mustLoad(t, `
capabilities:
  - { name: all, match: { syscall: "*" }, action: allow }
`), Options{})
	ctx := context.Background()
	cases := []struct {
		req  Request
		rule string
	}{
		{Request{Syscall: "fs.write", Path: ".fluffy/policy.yaml"}, "builtin.policy-files"},
		{Request{Syscall: "fs.delete", Path: ".FLUFFY/Policy.YAML"}, "builtin.policy-files"},
		{Request{Syscall: "fs.rename", Path: "./.fluffy//policy.d/x.yaml"}, "builtin.policy-files"},
		{Request{Syscall: "fs.write", Path: ".fluffy/coverage-baseline.json"}, "builtin.project-store"},
		{Request{Syscall: "fs.delete", Path: ".fluffy/Coverage-Baseline.JSON"}, "builtin.project-store"},
		{Request{Syscall: "fs.write", Path: ".fluffy/db/000001.vlog"}, "builtin.project-store"},
		{Request{Syscall: "fs.delete", Path: ".fluffy/db"}, "builtin.project-store"},
		{Request{Syscall: "fs.delete", Path: ".fluffy/db/"}, "builtin.project-store"},
		{Request{Syscall: "fs.write", Path: ".fluffy/db.corrupt-20260101/MANIFEST"}, "builtin.project-store"},
		{Request{Syscall: "fs.write", Path: ".fluffy/out/op/x.patch"}, "builtin.project-store"},
		{Request{Syscall: "fs.delete", Path: ".fluffy/policy.d"}, "builtin.policy-files"},
		{Request{Syscall: "fs.read", Path: ".fluffy/db/000001.vlog", Caller: Caller{Kind: "plugin", Plugin: "tool-fs"}}, "builtin.kernel-dir-private"},
		{Request{Syscall: "fs.list", Path: ".fluffy/", Caller: Caller{Kind: "plugin", Plugin: "tool-fs"}}, "builtin.kernel-dir-private"},
		{Request{Syscall: "search.grep", Path: ".Fluffy/policy.yaml", Caller: Caller{Kind: "plugin", Plugin: "tool-search"}}, "builtin.kernel-dir-private"},
		{Request{Syscall: "fs.write", Path: ".fluffy/policy.yaml", Caller: Caller{Kind: "plugin", Plugin: "tool-fs"}}, "builtin.kernel-dir-private"},
		{Request{Syscall: "fs.write", Path: ".fluffy/kernel.sock"}, "builtin.kernel-files"},
		{Request{Syscall: "fs.write", Path: ".fluffy/bootstrap/image.tar"}, "builtin.bootstrap-files"},
		{Request{Syscall: "fs.write", Path: "../outside.txt"}, "builtin.path-confinement"},
		{Request{Syscall: "fs.read", Path: "/etc/passwd"}, "builtin.path-confinement"},
		{Request{Syscall: "fs.read", Path: "src/../../x"}, "builtin.path-confinement"},
		{Request{Syscall: "policy.update", Caller: Caller{Kind: "plugin", Plugin: "evil"}}, "builtin.policy-update-review"},
	}
	for _, c := range cases {
		r := e.Evaluate(ctx, c.req)
		if r.Decision != Deny || r.DecidingRule() != c.rule {
			t.Errorf("%s: got %v by %q, want deny by %s", c.req, r.Decision, r.DecidingRule(), c.rule)
		}
	}
	if r := e.Evaluate(ctx, Request{Syscall: "fs.read", Path: ".fluffy/policy.yaml"}); r.Decision != Allow {
		t.Errorf("reading the policy is fine: %+v", r)
	}
	if r := e.Evaluate(ctx, Request{Syscall: "policy.update", Caller: Caller{Kind: "user"}}); r.Decision != RequireReview {
		t.Errorf("policy.update by the user: %+v", r)
	}
}

func TestIssueTokenThroughPolicy(t *testing.T) {
	now := testT0
	e := NewEngine(mustLoad(t, `
capabilities:
  - name: fs-write-source
    match: { syscall: fs.write, path_glob: ["src/**", "tests/**"] }
    action: allow
    constraints:
      require_sandbox: L2
      require_capability_token: true
      max_file_size: "100KiB"
      token_ttl: 10s
      token_max_ops: 2
`), Options{Clock: func() time.Time { return now }})
	ctx := context.Background()
	req := Request{Syscall: "fs.write", Path: "src/a.go", Sandbox: "code-executor", Size: 10, Caller: fsCaller, Peer: fsPeer}
	// Without a token the rule denies and says why.
	if r := e.Evaluate(ctx, req); r.Decision != Deny || !reasonsContain(r, "capability token") {
		t.Fatalf("without token: %+v", r)
	}
	tok, r, err := e.Issue(ctx, req, token.Scope{MaxOps: 50, Paths: []string{"**"}})
	if err != nil || tok.ID == "" {
		t.Fatalf("issue: %v %+v", err, r)
	}
	if tok.Scope.MaxOps != 2 || tok.Expires.Sub(tok.Issued) != 10*time.Second || len(tok.Scope.Paths) != 1 || tok.Scope.Paths[0] != "/src/a.go" {
		t.Fatalf("rule constraints must narrow the token: %+v", tok)
	}
	req.Token = &token.Use{ID: tok.ID, Nonce: 1}
	if r := e.Evaluate(ctx, req); !r.ByToken || r.Decision != Allow {
		t.Fatalf("with token: %+v", r)
	}
	// Replay of the same nonce falls back to the full evaluation.
	if r := e.Evaluate(ctx, req); r.ByToken || r.TokenStatus != token.Replay.String() || r.Decision != Deny {
		t.Fatalf("replay: %+v", r)
	}
	other := req
	other.Path = "src/b.go"
	other.Token = &token.Use{ID: tok.ID, Nonce: 5}
	if r := e.Evaluate(ctx, other); r.ByToken {
		t.Fatalf("token covers only the evaluated path: %+v", r)
	}
	// Too big: no token.
	big := req
	big.Size = 200 << 10
	if tok, r, _ := e.Issue(ctx, big, token.Scope{MaxOps: 1}); tok.ID != "" || r.Decision != Deny || !reasonsContain(r, "max_file_size 100KiB") {
		t.Fatalf("big: %+v %+v", tok, r)
	}
}

func TestExplainTraceAndNoConsume(t *testing.T) {
	e := NewEngine(mustLoad(t, `
capabilities:
  - { name: write-src, match: { syscall: fs.write, path_glob: ["src/**"] }, action: allow }
  - { name: no-gen, match: { syscall: fs.write, path_glob: ["*.gen.go"] }, action: deny, reason: "generated" }
  - { name: review-src, match: { syscall: fs.write, path_glob: ["src/**"] }, action: require_review, reason: "r" }
  - { name: other, match: { syscall: fs.read }, action: allow }
`), Options{Clock: fixedClock(testT0)})
	r := e.Explain(context.Background(), Request{Syscall: "fs.write", Path: "src/x.gen.go"})
	if r.Decision != Deny || r.DecidingRule() != "no-gen" {
		t.Fatalf("%+v", r)
	}
	matched := map[string]Action{}
	for _, ev := range r.Trace {
		if ev.Matched {
			matched[ev.Rule] = ev.Action
		}
	}
	want := map[string]Action{"write-src": Allow, "no-gen": Deny, "review-src": RequireReview}
	if !reflect.DeepEqual(matched, want) {
		t.Fatalf("explain must show every matching rule past the deny: %v", matched)
	}
	tok := issueRaw(t, e, token.Scope{Syscall: "fs.read", Paths: []string{"**"}, MaxOps: 1})
	req := Request{Syscall: "fs.read", Path: "a", Caller: fsCaller, Peer: fsPeer, Token: &token.Use{ID: tok.ID, Nonce: 1}}
	for i := 0; i < 3; i++ {
		if r := e.Explain(context.Background(), req); !r.ByToken {
			t.Fatalf("explain %d: %+v", i, r)
		}
	}
	if r := e.Evaluate(context.Background(), req); !r.ByToken {
		t.Fatal("explain consumed the token")
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, src, code, where string
	}{
		{"bad unit lower-case", "capabilities:\n  - name: a\n    match: { syscall: fs.write }\n    action: allow\n    constraints:\n      max_file_size: \"100kib\"\n", CodeBadUnit, "test.yaml:6"},
		{"bad unit decimal", "capabilities:\n  - name: a\n    match: { syscall: fs.write }\n    action: allow\n    constraints: { max_file_size: 1.5MiB }\n", CodeBadUnit, "test.yaml:5"},
		{"duration without unit", "capabilities:\n  - name: a\n    match: { syscall: test.run }\n    action: allow\n    constraints: { max_duration: 300 }\n", CodeBadUnit, "test.yaml:5"},
		{"unknown field", "capabilities:\n  - name: a\n    match: { syscall: fs.write, paht_glob: [x] }\n    action: allow\n", CodeUnknownField, "test.yaml:3"},
		{"unknown top", "capabilitys: []\n", CodeUnknownField, "test.yaml:1"},
		{"bad action", "capabilities:\n  - { name: a, match: { syscall: fs.write }, action: Allow }\n", CodeBadValue, "test.yaml:2"},
		{"bad glob", "capabilities:\n  - { name: a, match: { syscall: fs.write, path_glob: [\"[a-\"] }, action: allow }\n", CodeBadGlob, "test.yaml:2"},
		{"duplicate", "capabilities:\n  - { name: a, match: { syscall: fs.write }, action: allow }\n  - { name: a, match: { syscall: fs.read }, action: allow }\n", CodeDuplicateRule, "test.yaml:3"},
		{"bad mode enum", "capabilities:\n  - { name: a, match: { syscall: fs.write, session_mode: stric }, action: allow }\n", CodeBadValue, "test.yaml:2"},
		{"bad syscall", "capabilities:\n  - { name: a, match: { syscall: FS.Write }, action: allow }\n", CodeBadValue, "test.yaml:2"},
		{"no match", "capabilities:\n  - { name: a, action: allow }\n", CodeBadValue, "test.yaml:2"},
		{"syntax", "capabilities: [\n", CodeSyntax, "test.yaml"},
		{"failing example", "capabilities:\n  - name: a\n    match: { syscall: fs.write, path_glob: [\"src/**\"] }\n    action: allow\n    examples:\n      - { syscall: fs.write, path: lib/a.go }\n", CodeExampleFailed, "test.yaml:6"},
		{"failing counter-example", "capabilities:\n  - name: a\n    match: { syscall: fs.write, path_glob: [\"src/**\"] }\n    action: allow\n    counter_examples:\n      - { syscall: fs.write, path: src/a.go }\n", CodeExampleFailed, "test.yaml:6"},
		{"example blocked by except", "capabilities:\n  - name: a\n    match: { syscall: fs.write }\n    except: [ { path_glob: [\"*.md\"] } ]\n    action: allow\n    examples:\n      - { syscall: fs.write, path: README.md }\n", CodeExampleFailed, "test.yaml:7"},
		{"version", "version: 2\n", CodeBadValue, "test.yaml:1"},
		{"sanitize bad regex", "sanitize:\n  patterns:\n    - {name: a, regex: \"tok_[\"}\n", CodeBadValue, "test.yaml:3"},
		{"sanitize matches empty", "sanitize:\n  patterns:\n    - {name: a, regex: \"x*\"}\n", CodeBadValue, "test.yaml:3"},
		{"sanitize no name", "sanitize:\n  patterns:\n    - {regex: \"x+\"}\n", CodeBadValue, "test.yaml:3"},
		{"sanitize unknown field", "sanitize:\n  pattern: []\n", CodeUnknownField, "test.yaml:2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := loadErr(t, c.src, c.code)
			if !strings.Contains(err.Error(), c.where) {
				t.Fatalf("error does not say where (%s): %v", c.where, err)
			}
		})
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Fatal("missing file loaded")
	}
}

func TestWarnings(t *testing.T) {
	p := mustLoad(t, `
capabilities:
  - name: only-excludes
    match: { syscall: fs.write, path_glob: ["!src/**"] }
    action: allow
  - name: empty-except
    match: { syscall: fs.write }
    except: [ {} ]
    action: allow
  - name: subset-except
    match: { syscall: fs.write, caller_tag: [a], path_glob: ["src/**"] }
    except: [ { caller_tag: [a, b] } ]
    action: require_review
    reason: x
  - name: constraint-on-deny
    match: { syscall: fs.read }
    action: deny
    reason: x
    constraints: { max_file_size: 1KiB }
  - name: fine
    match: { syscall: fs.write, caller_tag: [a] }
    except: [ { caller_tag: [b] } ]
    action: require_review
    reason: x
`)
	got := map[string]string{}
	for _, w := range p.Warnings {
		got[w.Rule] = w.Code
		if w.Line == 0 || w.File != "test.yaml" {
			t.Errorf("warning without location: %+v", w)
		}
	}
	want := map[string]string{"only-excludes": WarnEmptyList, "empty-except": WarnNeverFires, "subset-except": WarnNeverFires, "constraint-on-deny": WarnConstraintIgnored}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("warnings %v want %v", got, want)
	}
}

// randomPolicy builds a policy text from random rules; the same rules in
// another order must give identical results.
func randomRules(r *rand.Rand, n int) []string {
	syscalls := []string{"fs.read", "fs.write", "net.connect", "fs.*", "shell.exec"}
	globs := []string{"src/**", "*.go", "tests/", "/README.md", "!src/vendor/", "docs/*.md", "**"}
	tags := []string{"a", "b", "third_party"}
	actions := []string{"allow", "deny", "require_review", "pass"}
	pick := func(xs []string, k int) string {
		var out []string
		for i := 0; i < k; i++ {
			out = append(out, fmt.Sprintf("%q", xs[r.IntN(len(xs))]))
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	cond := func() string {
		var parts []string
		if r.IntN(4) > 0 {
			parts = append(parts, "syscall: "+pick(syscalls, 1+r.IntN(2)))
		}
		if r.IntN(2) == 0 {
			parts = append(parts, "path_glob: "+pick(globs, 1+r.IntN(3)))
		}
		if r.IntN(3) == 0 {
			parts = append(parts, "caller_tag: "+pick(tags, 1+r.IntN(2)))
		}
		if len(parts) == 0 {
			parts = append(parts, "syscall: fs.read")
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	var rules []string
	for i := 0; i < n; i++ {
		s := fmt.Sprintf("  - name: r%d\n    match: %s\n    action: %s\n    reason: \"reason %d\"\n", i, cond(), actions[r.IntN(len(actions))], i)
		if r.IntN(3) == 0 {
			s += "    except: [ " + cond() + " ]\n"
		}
		rules = append(rules, s)
	}
	return rules
}

func TestShuffleNeverChangesDecision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	paths := []string{"src/a.go", "src/vendor/x.go", "tests/t_test.go", "README.md", "docs/a.md", "lib/x.py", ""}
	for round := 0; round < 60; round++ {
		rules := randomRules(r, 3+r.IntN(12))
		base := NewEngine(mustLoad(t, "capabilities:\n"+strings.Join(rules, "")), Options{Clock: fixedClock(testT0)})
		for sh := 0; sh < 4; sh++ {
			r.Shuffle(len(rules), func(i, j int) { rules[i], rules[j] = rules[j], rules[i] })
			other := NewEngine(mustLoad(t, "capabilities:\n"+strings.Join(rules, "")), Options{Clock: fixedClock(testT0)})
			for _, sc := range []string{"fs.read", "fs.write", "net.connect", "shell.exec", "fs.delete"} {
				for _, p := range paths {
					for _, tags := range [][]string{nil, {"a"}, {"b", "third_party"}} {
						req := Request{Syscall: sc, Path: p, Caller: Caller{Tags: tags}}
						a, b := base.Explain(context.Background(), req), other.Explain(context.Background(), req)
						// Source (file:line) moves with the rule; everything else must not.
						if a.Decision != b.Decision || !reflect.DeepEqual(a.Reasons, b.Reasons) || !reflect.DeepEqual(noSource(a.Deciding), noSource(b.Deciding)) || !reflect.DeepEqual(noSource(a.Trace), noSource(b.Trace)) {
							t.Fatalf("round %d: rule order changed the result for %s:\n%+v\n%+v", round, req, a, b)
						}
					}
				}
			}
		}
	}
}

func TestUpdateTrialAndCommit(t *testing.T) {
	old := mustLoad(t, `
capabilities:
  - { name: write-src, match: { syscall: fs.write, path_glob: ["src/**"] }, action: allow }
  - { name: read-all, match: { syscall: fs.read, path_glob: ["**"] }, action: allow }
`)
	e := NewEngine(old, Options{})
	src := NewMemoryDecisions(0)
	ctx := context.Background()
	var reqs []Request
	for i := 0; i < 8; i++ {
		reqs = append(reqs, Request{Syscall: "fs.write", Path: fmt.Sprintf("src/f%d.go", i)})
	}
	reqs = append(reqs, Request{Syscall: "fs.read", Path: "README.md"}, Request{Syscall: "fs.write", Path: "docs/a.md"})
	for _, q := range reqs {
		res := e.Evaluate(ctx, q)
		src.Record(RecordedDecision{Request: q, Decision: res.Decision, Rule: res.DecidingRule(), At: res.At})
	}
	newText := []byte(`
capabilities:
  - { name: write-src, match: { syscall: fs.write, path_glob: ["src/f1.go", "src/f2.go"] }, action: allow }
  - { name: read-all, match: { syscall: fs.read, path_glob: ["**"] }, action: allow }
  - { name: docs, match: { syscall: fs.write, path_glob: ["docs/**"] }, action: require_review, reason: "docs" }
`)
	prop, err := Prepare("new.yaml", newText, src)
	if err != nil {
		t.Fatal(err)
	}
	if prop.Replayed != 10 || prop.Breaking != 6 || len(prop.Changes) != 7 {
		t.Fatalf("trial: replayed %d breaking %d changes %v", prop.Replayed, prop.Breaking, prop.Changes)
	}
	for _, c := range prop.Changes {
		if c.Breaking != strings.HasPrefix(c.String(), "[BREAKING]") || (c.Breaking && (c.Old != Allow || c.New != Deny)) {
			t.Fatalf("change %v", c)
		}
	}
	path := filepath.Join(t.TempDir(), ".fluffy", "policy.yaml")
	phrase := prop.ConfirmPhrase()
	if phrase != "apply 6 breaking changes" {
		t.Fatalf("phrase %q", phrase)
	}
	if err := Commit(path, prop, "yes", e); err == nil {
		t.Fatal("committed without the phrase")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("file written despite refusal")
	}
	if err := Commit(path, prop, phrase, e); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != string(newText) || e.Policy().Hash != prop.Policy.Hash {
		t.Fatal("file or engine not updated")
	}
	if r := e.Evaluate(ctx, Request{Syscall: "fs.write", Path: "src/f5.go"}); r.Decision != Deny {
		t.Fatalf("engine did not reload: %+v", r)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temp files left: %v", entries)
	}
	if _, err := Prepare("bad.yaml", []byte("capabilities: [ { name: a } ]"), src); err == nil {
		t.Fatal("invalid policy prepared")
	}
}

func TestMemoryDecisionsBound(t *testing.T) {
	m := NewMemoryDecisions(3)
	for i := 0; i < 5; i++ {
		m.Record(RecordedDecision{Rule: fmt.Sprint(i)})
	}
	got, _ := m.RecentDecisions(100)
	if len(got) != 3 || got[0].Rule != "2" || got[2].Rule != "4" {
		t.Fatalf("%+v", got)
	}
	got, _ = m.RecentDecisions(1)
	if len(got) != 1 || got[0].Rule != "4" {
		t.Fatalf("%+v", got)
	}
}

func TestWatcherHotReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	v1 := "capabilities:\n  - { name: a, match: { syscall: fs.read }, action: allow }\n"
	if err := os.WriteFile(path, []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(p, Options{})
	w := NewWatcher(e, path, time.Millisecond, nil)
	var attempts []error
	w.OnReload = func(_ *Policy, err error) { attempts = append(attempts, err) }
	if w.Check() {
		t.Fatal("reloaded an unchanged file")
	}
	v2 := "capabilities:\n  - { name: a, match: { syscall: fs.read }, action: deny, reason: closed }\n"
	if err := WriteAtomic(path, []byte(v2)); err != nil {
		t.Fatal(err)
	}
	if !w.Check() {
		t.Fatal("change not picked up")
	}
	if r := e.Evaluate(context.Background(), Request{Syscall: "fs.read", Path: "a"}); r.Decision != Deny {
		t.Fatalf("new policy not in force: %+v", r)
	}
	if err := os.WriteFile(path, []byte("capabilities:\n  - { name: a, match: { syscall: fs.read }, action: allow, constraints: { max_file_size: 1kb } }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(path, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if w.Check() {
		t.Fatal("a broken policy was installed")
	}
	if e.Policy().Hash != mustLoad(t, v2).Hash {
		t.Fatal("old policy not kept after a failed reload")
	}
	if len(attempts) != 2 || attempts[0] != nil || attempts[1] == nil {
		t.Fatalf("OnReload calls: %v", attempts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	w.Run(ctx) // returns when ctx ends
}

func noSource(evs []RuleEval) []RuleEval {
	out := make([]RuleEval, len(evs))
	for i, ev := range evs {
		ev.Source = ""
		if i := strings.Index(ev.Note, " (line"); i >= 0 {
			ev.Note = ev.Note[:i]
		}
		out[i] = ev
	}
	return out
}

// TestDeepPathBeyondStackBuffer: the engine splits paths into a stack buffer
// of pathSegs segments; deeper paths must be judged exactly the same.
func TestDeepPathBeyondStackBuffer(t *testing.T) {
	p, err := Load("deep.yaml", []byte("capabilities:\n  - { name: allow-src, match: { syscall: fs.write, path_glob: [\"src/**\"] }, action: allow }\n  - { name: no-secret, match: { syscall: fs.write, path_glob: [\"**/secret.txt\"] }, action: deny }\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(p, Options{Clock: fixedClock(testT0)})
	deep := "src/" + strings.Repeat("d/", 3*pathSegs)
	cases := []struct {
		path string
		want Action
	}{
		{deep + "ok.go", Allow},
		{deep + "secret.txt", Deny},
		{deep + "../../x.go", Deny},
		{strings.Repeat("x/", 3*pathSegs) + "y", Deny},
	}
	for _, c := range cases {
		if r := e.Evaluate(context.Background(), Request{Syscall: "fs.write", Path: c.path}); r.Decision != c.want {
			t.Errorf("%s: %v (%v), want %v", c.path, r.Decision, r.Reasons, c.want)
		}
	}
}

// TestProjectRoot: "." names the project root. It is a valid path (not an
// "empty path" confinement deny), only "**" patterns match it, and no
// capability token covers it.
func TestProjectRoot(t *testing.T) {
	p, err := Load("root.yaml", []byte(`capabilities:
  - name: list-all
    match: {syscall: fs.list, path_glob: ["**"]}
    action: allow
  - name: read-src
    match: {syscall: fs.read, path_glob: ["src/**", "*"]}
    action: allow
`))
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(p, Options{})
	for _, c := range []struct {
		syscall, path string
		want          Action
	}{
		{"fs.list", ".", Allow},
		{"fs.list", "./", Allow},
		{"fs.list", "./.", Allow},
		{"fs.read", ".", Deny}, // neither src/** nor * matches the root
		{"fs.list", "..", Deny},
		{"fs.list", "./..", Deny},
		{"fs.list", "/", Deny},
	} {
		if got := e.Evaluate(context.Background(), Request{Syscall: c.syscall, Path: c.path}); got.Decision != c.want {
			t.Errorf("%s %q: %s %v, want %s", c.syscall, c.path, got.Decision, got.Reasons, c.want)
		}
	}
	if _, _, err := e.Issue(context.Background(), Request{Syscall: "fs.list", Path: ".", Caller: Caller{Instance: "i"}}, token.Scope{}); err == nil {
		t.Error("a token for the root was issued")
	}
}

func TestSanitizeSection(t *testing.T) {
	p := mustLoad(t, "sanitize:\n  patterns:\n    - {name: itk, regex: 'itk_[a-z0-9]{8,}'}\n")
	if len(p.Sanitize) != 1 || p.Sanitize[0].Name != "itk" || !p.Sanitize[0].Re.MatchString("x itk_abcdefgh1") {
		t.Fatalf("sanitize: %+v", p.Sanitize)
	}
}
