package state

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

var (
	user = policy.Caller{Kind: "user"}
	ai   = policy.Caller{Kind: "plugin", Plugin: "provider-openai", PluginKind: "provider"}
)

func TestSetModeThroughPolicy(t *testing.T) {
	ctx := context.Background()
	t.Run("user asks explore: the default policy allows it", func(t *testing.T) {
		e := newEnv(t, nil)
		m, _ := e.session("s", "")
		got, err := m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: user, Reason: "prototype"})
		if err != nil || got != Explore || m.Position().Mode != Explore || m.Position().Flow() != FlowExplore {
			t.Fatalf("SetMode = %s, %v", got, err)
		}
		recs := e.records(audit.EventSessionModeChange)
		if len(recs) != 1 || recs[0].Metadata["to_mode"] != "explore" || recs[0].PolicyDecision != audit.DecisionAllowed || recs[0].Caller != "user" {
			t.Fatalf("audit %+v", recs)
		}
	})
	t.Run("the AI asks explore: the default policy refuses, strict stays", func(t *testing.T) {
		e := newEnv(t, nil)
		m, _ := e.session("s", "")
		got, err := m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: ai})
		var mr *ModeRefusedError
		if !errors.As(err, &mr) || got != Strict || m.Position().Mode != Strict || !uerr.HasCode(err, CodeModeRefused) {
			t.Fatalf("SetMode = %s, %v", got, err)
		}
		recs := e.records(audit.EventSessionModeChange)
		if len(recs) != 1 || recs[0].PolicyDecision != audit.DecisionDenied || recs[0].Metadata["requested"] != "explore" || recs[0].Caller != "provider-openai" {
			t.Fatalf("refusal audit %+v", recs)
		}
	})
	t.Run("a refused change from explore falls back to strict", func(t *testing.T) {
		e := newEnv(t, nil)
		m, _ := e.session("s", "")
		if _, err := m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: user}); err != nil {
			t.Fatal(err)
		}
		got, err := m.SetMode(ctx, ModeRequest{Mode: Debug, Caller: ai})
		if err == nil || got != Strict || m.Position().Mode != Strict {
			t.Fatalf("SetMode = %s, %v", got, err)
		}
		h, _ := m.History(0)
		last := h[len(h)-1]
		if last.Kind != kindMode || last.FromMode != Explore || last.Mode != Strict || !strings.Contains(last.Note, "refused debug") {
			t.Fatalf("history %+v", h)
		}
	})
	t.Run("debug needs a review", func(t *testing.T) {
		e := newEnv(t, nil)
		m, _ := e.session("s", "")
		e.appr.answer = false
		if got, err := m.SetMode(ctx, ModeRequest{Mode: Debug, Caller: user}); err == nil || got != Strict {
			t.Fatalf("refused review: %s %v", got, err)
		}
		e.appr.answer = true
		got, err := m.SetMode(ctx, ModeRequest{Mode: Debug, Caller: user, Reason: "investigate a flaky build"})
		if err != nil || got != Debug {
			t.Fatalf("approved review: %s %v", got, err)
		}
		if len(e.appr.asked) != 2 || e.appr.asked[1].Kind != "session_mode" || !strings.Contains(e.appr.asked[1].Why, "shell.exec") {
			t.Fatalf("reviews asked: %+v", e.appr.asked)
		}
	})
	t.Run("debug without a reviewer is refused even if the policy allows it", func(t *testing.T) {
		e := newEnv(t, func(o *Options) {
			p, err := policy.Load("allow.yaml", []byte("version: 1\ncapabilities:\n  - {name: any-mode, match: {syscall: session.set_mode}, action: allow}\n"))
			if err != nil {
				panic(err)
			}
			o.Policy, o.Approver = policy.NewEngine(p, policy.Options{}), nil
		})
		m, _ := e.session("s", "")
		if got, err := m.SetMode(ctx, ModeRequest{Mode: Debug, Caller: ai}); err == nil || got != Strict || !strings.Contains(err.Error(), "no reviewer") {
			t.Fatalf("SetMode = %s, %v", got, err)
		}
		if got, err := m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: ai}); err != nil || got != Explore {
			t.Fatalf("explore under an allow-all policy: %s %v", got, err)
		}
	})
	t.Run("no mode change in the middle of a task", func(t *testing.T) {
		e := newEnv(t, nil)
		m, _ := e.session("s", "")
		_, _ = m.Start(ctx, "x")
		if _, err := m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: user}); err != nil {
			t.Fatalf("while planning: %v", err)
		}
		if _, err := m.PlanComplete(ctx, "p", "ai"); err != nil || m.Position().State != Exploring {
			t.Fatalf("explore plan: %v %s", err, m.Position().State)
		}
		if got, err := m.SetMode(ctx, ModeRequest{Mode: Strict, Caller: user}); !uerr.HasCode(err, CodeModeBusy) || got != Explore {
			t.Fatalf("while exploring: %s %v", got, err)
		}
	})
	t.Run("unknown mode", func(t *testing.T) {
		e := newEnv(t, nil)
		m, _ := e.session("s", "")
		if _, err := m.SetMode(ctx, ModeRequest{Mode: "yolo", Caller: user}); !uerr.HasCode(err, CodeBadMode) {
			t.Fatal(err)
		}
	})
}

func TestDebugModeGate(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.appr.answer = true
	m, _ := e.session("s", "")
	if _, err := m.SetMode(ctx, ModeRequest{Mode: Debug, Caller: user}); err != nil {
		t.Fatal(err)
	}
	_, _ = m.Start(ctx, "why does the build hang")
	var rv *ReviewRequiredError
	if err := m.Allowed(ToolShellExec, "", false); !errors.As(err, &rv) {
		t.Fatalf("shell.exec while planning in debug: %v", err)
	}
	if _, err := m.PlanComplete(ctx, "look around", "ai"); err != nil || m.Position().State != Exploring {
		t.Fatal(err)
	}
	if err := m.Allowed(ToolContainerRun, "", false); !errors.As(err, &rv) || !uerr.HasCode(err, CodeReviewRequired) {
		t.Fatalf("container.run while exploring in debug: %v", err)
	}
	if err := m.Allowed("fs.write", "main.go", true); err != nil {
		t.Fatalf("debug = explore plus: %v", err)
	}
}

func TestExemptions(t *testing.T) {
	ctx := context.Background()
	t.Run("README.md as documentation is granted", func(t *testing.T) {
		e := newEnv(t, nil)
		m, v := e.session("s", "green")
		_, _ = m.Start(ctx, "document the API")
		ex, err := m.RequestExemption(ctx, ExemptionRequest{Category: Documentation, AffectedPaths: []string{"README.md"}, Reason: "docs only"}, "ai")
		if err != nil || ex.Category != Documentation || len(ex.Paths) != 1 {
			t.Fatalf("RequestExemption = %+v, %v", ex, err)
		}
		if p := m.Position(); p.State != Exploring || p.Mode != Strict || p.Flow() != FlowExplore {
			t.Fatalf("position %+v", p)
		}
		if err := m.Allowed("fs.write", "README.md", true); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"calc.go", "CHANGELOG.md", "calc_test.go"} {
			if err := m.Allowed("fs.write", p, true); err == nil {
				t.Fatalf("%s writable under a README.md exemption", p)
			}
		}
		recs := e.records(audit.EventSyscall)
		if len(recs) != 1 || recs[0].SyscallType != ToolRequestExemption || recs[0].PolicyDecision != audit.DecisionAllowed ||
			recs[0].Metadata["category"] != "documentation" || recs[0].Metadata["paths"] != `["README.md"]` || recs[0].InputSummary != "docs only" {
			t.Fatalf("audit %+v", recs)
		}
		// The exempt change commits without consuming the budget, even
		// with coverage far below the baseline.
		if err := e.mg.Budget().save(Baseline{Percent: 99}); err != nil {
			t.Fatal(err)
		}
		v.write(t, "README.md", "# calc\n")
		if _, err := m.RecordTestRun(ctx, goTest(t, v)); err != nil || m.Position().State != Reviewing {
			t.Fatalf("validate: %v %s", err, m.Position().State)
		}
		if _, err := m.Review(ctx, Approval{Approved: true, By: "u"}); err != nil {
			t.Fatalf("exempt commit refused: %v", err)
		}
		if _, err := m.Committed(ctx, "c1"); err != nil || m.Position().State != Idle || m.Position().Exemption != nil {
			t.Fatalf("committed: %v %+v", err, m.Position())
		}
		if bl, _, _ := e.mg.Budget().Load(); bl.Percent != 99 || bl.Lock != nil {
			t.Fatalf("exemption consumed budget: %+v", bl)
		}
	})
	t.Run("main.go as documentation is refused", func(t *testing.T) {
		e := newEnv(t, nil)
		m, _ := e.session("s", "")
		_, _ = m.Start(ctx, "x")
		_, _ = m.PlanComplete(ctx, "p", "ai")
		_, err := m.RequestExemption(ctx, ExemptionRequest{Category: Documentation, AffectedPaths: []string{"README.md", "main.go"}, Reason: "it is documented code"}, "ai")
		if !uerr.HasCode(err, CodeExemptionDenied) || !strings.Contains(err.Error(), "main.go do not match the documentation globs") {
			t.Fatalf("err = %v", err)
		}
		if p := m.Position(); p.State != TestWriting || p.Exemption != nil {
			t.Fatalf("position %+v", p)
		}
		recs := e.records(audit.EventSyscall)
		if len(recs) != 1 || recs[0].PolicyDecision != audit.DecisionDenied || !strings.Contains(recs[0].DenyReason, "main.go") ||
			recs[0].Metadata["paths"] != `["README.md","main.go"]` {
			t.Fatalf("audit %+v", recs)
		}
	})
	refusals := []struct {
		name string
		req  ExemptionRequest
		want string
	}{
		{"unknown category", ExemptionRequest{Category: "refactor", AffectedPaths: []string{"a.md"}, Reason: "r"}, "unknown category"},
		{"no reason", ExemptionRequest{Category: Documentation, AffectedPaths: []string{"a.md"}}, "needs a reason"},
		{"no paths", ExemptionRequest{Category: Documentation, Reason: "r"}, "1 to 100 paths"},
		{"escaping path", ExemptionRequest{Category: Documentation, AffectedPaths: []string{"../x.md"}, Reason: "r"}, "not a clean"},
		{"control character", ExemptionRequest{Category: Documentation, AffectedPaths: []string{"a\x1b[2J.md"}, Reason: "r"}, "not a clean"},
		{"type_refactor of .ts", ExemptionRequest{Category: TypeRefactor, AffectedPaths: []string{"src/app.ts"}, Reason: "r"}, "do not match"},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			m, _ := e.session("s", "")
			_, _ = m.Start(ctx, "x")
			if _, err := m.RequestExemption(ctx, c.req, "ai"); !uerr.HasCode(err, CodeExemptionDenied) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
			if len(e.records(audit.EventSyscall)) != 1 {
				t.Fatal("request not audited")
			}
		})
	}
	t.Run("only in strict mode before code", func(t *testing.T) {
		e := newEnv(t, nil)
		m, _ := e.session("s", "")
		_, _ = m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: user})
		_, _ = m.Start(ctx, "x")
		if _, err := m.RequestExemption(ctx, ExemptionRequest{Category: Documentation, AffectedPaths: []string{"a.md"}, Reason: "r"}, "ai"); !uerr.HasCode(err, CodeExemptionDenied) {
			t.Fatalf("explore mode: %v", err)
		}
	})
}
