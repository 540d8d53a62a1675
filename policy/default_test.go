package policy

import (
	"context"
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
		{"write elsewhere", Request{Syscall: "fs.write", Path: "scripts/x.sh", Sandbox: "code-executor", Caller: tool}, Deny},
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
