package policy

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy/token"
)

// testExt is a real goroutine-level extension whose behaviour is a function.
type testExt struct {
	name     string
	f        func(ctx context.Context, req Request) (Verdict, error)
	calls    atomic.Int64
	restarts atomic.Int64
}

func (x *testExt) Name() string { return x.name }
func (x *testExt) Evaluate(ctx context.Context, req Request) (Verdict, error) {
	x.calls.Add(1)
	return x.f(ctx, req)
}
func (x *testExt) Restart(context.Context) error { x.restarts.Add(1); return nil }

func verdictExt(name string, a Action, reason string) *testExt {
	return &testExt{name: name, f: func(context.Context, Request) (Verdict, error) { return Verdict{a, reason}, nil }}
}

func mustLoad(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Load("test.yaml", []byte(src))
	if err != nil {
		if ue, ok := uerr.As(err); ok {
			t.Fatalf("load: %s", ue.Render())
		}
		t.Fatalf("load: %v", err)
	}
	return p
}

func loadErr(t *testing.T, src, code string) error {
	t.Helper()
	_, err := Load("test.yaml", []byte(src))
	if err == nil {
		t.Fatalf("want load error %s, got none", code)
	}
	if !uerr.HasCode(err, code) {
		t.Fatalf("want code %s, got %v", code, err)
	}
	return err
}

func hasWarning(p *Policy, code string) bool {
	for _, w := range p.Warnings {
		if w.Code == code {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func reasonsContain(r Result, s string) bool {
	return strings.Contains(strings.Join(r.Reasons, "\n"), s)
}

var (
	testT0   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fsCaller = Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool", Instance: "tool-fs#1"}
	fsPeer   = Peer{PID: 4242, ContainerID: "ctr-1"}
)

func issueRaw(t *testing.T, e *Engine, sc token.Scope) token.Token {
	t.Helper()
	tok, err := e.Tokens().Issue(token.Binding{Instance: fsCaller.Instance, PID: fsPeer.PID, ContainerID: fsPeer.ContainerID}, sc, testT0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
