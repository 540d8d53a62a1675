package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/policy/token"
)

// benchPolicy builds n rules. spread=true distributes them over n/10 (at
// least 1) syscall types, as real policies do; spread=false puts them all on
// the benchmarked syscall (the index's worst case).
func benchPolicy(b *testing.B, n int, spread bool) *Policy {
	var sb strings.Builder
	sb.WriteString("capabilities:\n")
	kinds := max(1, n/10)
	actions := []string{"allow", "require_review", "pass"}
	for i := 0; i < n; i++ {
		sc := fmt.Sprintf("svc%d.write", i%kinds)
		if !spread || i%kinds == 0 {
			sc = "fs.write"
		}
		fmt.Fprintf(&sb, "  - name: r%d\n    match: { syscall: %q, path_glob: [\"dir%d/**\", \"*.ext%d\"], caller_tag: [\"t%d\", \"core_plugin\"] }\n    action: %s\n    reason: \"r%d\"\n",
			i, sc, i, i, i%7, actions[i%len(actions)], i)
	}
	// The rule that allows the benchmarked request.
	sb.WriteString("  - { name: allow-src, match: { syscall: fs.write, path_glob: [\"src/**\"] }, action: allow }\n")
	p, err := Load("bench.yaml", []byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	return p
}

var benchReq = Request{Syscall: "fs.write", Path: "src/pkg/deep/file.go", Sandbox: "code-executor", Size: 2048,
	Caller: Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool", Instance: "tool-fs#1", Tags: []string{"core_plugin"}},
	Peer:   Peer{PID: 4242, ContainerID: "ctr-1"}}

func BenchmarkTokenFastPath(b *testing.B) {
	e := NewEngine(benchPolicy(b, 100, true), Options{Clock: fixedClock(testT0)})
	req := benchReq
	use := token.Use{}
	req.Token = &use
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if use.Nonce%token.MaxOps == 0 { // a token grants at most MaxOps operations
			use = token.Use{ID: benchToken(b, e, use.ID)}
		}
		use.Nonce++
		if r := e.Evaluate(ctx, req); !r.ByToken {
			b.Fatalf("%+v", r)
		}
	}
}

func benchYAML(b *testing.B, n int, spread bool) {
	e := NewEngine(benchPolicy(b, n, spread), Options{Clock: fixedClock(testT0)})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := e.Evaluate(ctx, benchReq); r.Decision != Allow && r.Decision != RequireReview {
			b.Fatalf("%+v", r)
		}
	}
}

func BenchmarkYAMLPath(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) { benchYAML(b, n, true) })
	}
	// Worst case for the index: every rule names the same syscall.
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("rules=%d/same-syscall", n), func(b *testing.B) { benchYAML(b, n, false) })
	}
}

func BenchmarkDefaultPolicy(b *testing.B) {
	p, err := Default()
	if err != nil {
		b.Fatal(err)
	}
	e := NewEngine(p, Options{Clock: fixedClock(testT0)})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := e.Evaluate(ctx, benchReq); r.Decision != Allow {
			b.Fatalf("%+v", r)
		}
	}
}

func BenchmarkLoadDefault(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Default(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokenFastPathParallel: every goroutine uses its own token (as
// plugin instances do), so only the engine and the token store are shared.
func BenchmarkTokenFastPathParallel(b *testing.B) {
	e := NewEngine(benchPolicy(b, 100, true), Options{Clock: fixedClock(testT0)})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := benchReq
		use := token.Use{}
		req.Token = &use
		for pb.Next() {
			if use.Nonce%token.MaxOps == 0 {
				use = token.Use{ID: benchToken(b, e, use.ID)}
			}
			use.Nonce++
			if r := e.Evaluate(ctx, req); !r.ByToken {
				b.Errorf("%+v", r)
				return
			}
		}
	})
}

// benchToken revokes old (when set) and issues a fresh token of MaxOps
// operations for benchReq's caller.
func benchToken(b *testing.B, e *Engine, old string) string {
	if old != "" {
		e.Tokens().Revoke(old)
	}
	tok, err := e.Tokens().Issue(token.Binding{Instance: "tool-fs#1", PID: 4242, ContainerID: "ctr-1"},
		token.Scope{Syscall: "fs.write", Paths: []string{"src/**"}, MaxOps: token.MaxOps, TTL: token.MaxTTL}, testT0)
	if err != nil {
		panic(err) // called from RunParallel's goroutines too, where b.Fatal may not be
	}
	return tok.ID
}
