package policy

import (
	"context"
	"slices"
	"testing"
)

func TestDefaultPolicy(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 0 {
		t.Fatalf("default policy has warnings: %v", p.Warnings)
	}
	e := NewEngine(p, Options{})
	provider := Caller{Kind: "plugin", Plugin: "provider-openai", PluginKind: "provider", Instance: "p#1", Hosts: []string{"api.openai.com"}}
	tool := Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool", Instance: "t#1", Tags: []string{"core_plugin"}}
	cases := []struct {
		name string
		req  Request
		want Action
	}{
		{"read source", Request{Syscall: "fs.read", Path: "src/a.go", Caller: tool}, Allow},
		{"read .env", Request{Syscall: "fs.read", Path: ".env", Caller: tool}, Deny},
		{"read nested key", Request{Syscall: "fs.read", Path: "deploy/server.key", Caller: tool}, Deny},
		{"read .env.example", Request{Syscall: "fs.read", Path: ".env.example", Caller: tool}, Allow},
		{"write src in sandbox", Request{Syscall: "fs.write", Path: "src/a.go", Sandbox: "code-executor", Size: 100, Caller: tool}, Allow},
		{"write src without sandbox", Request{Syscall: "fs.write", Path: "src/a.go", Caller: tool}, Deny},
		{"write src too big", Request{Syscall: "fs.write", Path: "src/a.go", Sandbox: "code-executor", Size: 2 << 20, Caller: tool}, Deny},
		{"write tests", Request{Syscall: "fs.write", Path: "tests/a_test.go", Sandbox: "code-executor", Caller: tool}, Allow},
		{"write go.mod", Request{Syscall: "fs.write", Path: "go.mod", Sandbox: "code-executor", Caller: tool}, RequireReview},
		{"write README", Request{Syscall: "fs.write", Path: "README.md", Sandbox: "code-executor", Caller: tool}, RequireReview},
		{"write outside src and tests", Request{Syscall: "fs.write", Path: "scripts/x.sh", Sandbox: "code-executor", Caller: tool}, Allow},
		{"write secret in src", Request{Syscall: "fs.write", Path: "src/.env", Sandbox: "code-executor", Caller: tool}, Deny},
		{"write policy file", Request{Syscall: "fs.write", Path: ".fluffy/policy.yaml", Sandbox: "code-executor", Caller: tool}, Deny},
		{"tdd red phase", Request{Syscall: "fs.write", Path: "src/a.go", Sandbox: "code-executor", SessionMode: "strict", State: "test_writing", Caller: tool}, Deny},
		{"tdd test file", Request{Syscall: "fs.write", Path: "src/a_test.go", Sandbox: "code-executor", SessionMode: "strict", State: "test_writing", Caller: tool}, Allow},
		{"provider declared host", Request{Syscall: "net.connect", Host: "api.openai.com", Caller: provider}, Allow},
		{"provider other host", Request{Syscall: "net.connect", Host: "evil.example", Caller: provider}, Deny},
		{"tool network", Request{Syscall: "net.connect", Host: "api.openai.com", Caller: tool}, Deny},
		{"shell", Request{Syscall: "shell.exec", Caller: tool}, Deny},
		{"shell strict", Request{Syscall: "shell.exec", SessionMode: "strict", Caller: tool}, Deny},
		{"shell explore", Request{Syscall: "shell.exec", SessionMode: "explore", Caller: tool}, Deny},
		{"shell debug", Request{Syscall: "shell.exec", SessionMode: "debug", Caller: tool}, RequireReview},
		{"tests run", Request{Syscall: "test.run", Sandbox: "code-executor", Caller: tool}, Allow},
		{"container.run strict", Request{Syscall: "container.run", SessionMode: "strict", Caller: tool}, Deny},
		{"container.run debug", Request{Syscall: "container.run", SessionMode: "debug", Caller: tool}, RequireReview},
		{"plugin install", Request{Syscall: "plugin.install", Caller: Caller{Kind: "user"}}, RequireReview},
		{"policy update by user", Request{Syscall: "policy.update", Caller: Caller{Kind: "user"}}, RequireReview},
		{"policy update by plugin", Request{Syscall: "policy.update", Caller: tool}, Deny},
		{"third-party write", Request{Syscall: "fs.write", Path: "src/a.go", Sandbox: "code-executor", Caller: Caller{Kind: "plugin", Plugin: "x", Tags: []string{"third_party"}}}, RequireReview},
	}
	for _, c := range cases {
		if got := e.Evaluate(context.Background(), c.req); got.Decision != c.want {
			t.Errorf("%s: got %v (%v) want %v", c.name, got.Decision, got.Reasons, c.want)
		}
	}
}

// TestDefaultPolicyProjectLayouts: on the default policy, each language's
// usual layout is writable where its files live. Tests are writable in
// every writing state; source is refused in strict mode before red (idle,
// planning, test_writing) and writable after it; .git, .fluffy and secrets
// are never writable; build, dependency and CI files are reviewed.
func TestDefaultPolicyProjectLayouts(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(p, Options{})
	tool := Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool", Instance: "t#1", Tags: []string{"core_plugin"}}
	const (
		test   = "test"   // allowed before and after red
		source = "source" // denied before red, allowed after
		never  = "never"  // denied in every state
		review = "review" // reviewed in every state that does not deny it
	)
	cases := []struct {
		path, kind string
	}{
		// Go module with its code at the root.
		{"csv.go", source},
		{"csv_test.go", test},
		{"internal/parse/parse.go", source},
		{"internal/parse/parse_test.go", test},
		{"testdata/in.csv", test},
		{"cmd/tool/main.go", source},
		// Python: a package directory, tests/ and test_*.py beside the code.
		{"mypkg/__init__.py", source},
		{"mypkg/core.py", source},
		{"mypkg/test_core.py", test},
		{"mypkg/core_test.py", test},
		{"tests/test_core.py", test},
		{"conftest.py", test},
		// Node: lib/, __tests__/, *.test.ts, *.spec.js, test/.
		{"lib/parse.js", source},
		{"index.ts", source},
		{"__tests__/parse.js", test},
		{"lib/__tests__/parse.js", test},
		{"src/parse.test.ts", test},
		{"lib/parse.spec.js", test},
		{"test/parse.js", test},
		// Rust: src/, tests/, benches/.
		{"src/lib.rs", source},
		{"src/main.rs", source},
		{"tests/integration.rs", test},
		{"benches/bench.rs", source},
		// Never writable.
		{".git/x", never},
		{".git/hooks/pre-commit", never},
		{".fluffy/db/x", never},
		{".fluffy/policy.yaml", never},
		{".env", never},
		{"config/.env.production", never},
		{"deploy/server.key", never},
		// Build, dependency and CI files.
		{"go.mod", review},
		{"go.sum", review},
		{"package.json", review},
		{"package-lock.json", review},
		{"yarn.lock", review},
		{"Cargo.toml", review},
		{"Cargo.lock", review},
		{"pyproject.toml", review},
		{"setup.py", review},
		{"setup.cfg", review},
		{"requirements.txt", review},
		{"requirements-dev.txt", review},
		{"Makefile", review},
		{"Dockerfile", review},
		{".github/workflows/ci.yml", review},
		{".gitlab-ci.yml", review},
	}
	type pos struct{ mode, state string }
	beforeRed := []pos{{"strict", "idle"}, {"strict", "planning"}, {"strict", "test_writing"}}
	afterRed := []pos{{"strict", "code_writing"}, {"explore", "exploring"}, {"debug", "exploring"}, {"explore", "retroactive_testing"}}
	for _, c := range cases {
		for _, ps := range [][]pos{beforeRed, afterRed} {
			for _, at := range ps {
				want := Allow
				switch {
				case c.kind == never:
					want = Deny
				case c.kind == review && at.mode == "strict" && slices.Contains(beforeRed, at):
					want = Deny // build files are not tests: the red phase refuses them first
				case c.kind == review:
					want = RequireReview
				case c.kind == source && slices.Contains(beforeRed, at):
					want = Deny
				}
				for _, sc := range []string{"fs.write", "fs.delete"} {
					req := Request{Syscall: sc, Path: c.path, Sandbox: "code-executor", Size: 10, SessionMode: at.mode, State: at.state, Caller: tool}
					if got := e.Evaluate(context.Background(), req); got.Decision != want {
						t.Errorf("%s %s (%s) in %s/%s: got %v (%v), want %v", sc, c.path, c.kind, at.mode, at.state, got.Decision, got.Reasons, want)
					}
				}
			}
		}
	}
}
