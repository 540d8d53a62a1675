package state

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// exploreToReview runs one explore task on the green fixture to reviewing
// and returns the validating run (real, with real coverage).
func exploreToReview(t *testing.T, e *env, m *Machine, v *dirView) testrun.Run {
	t.Helper()
	ctx := context.Background()
	if m.Position().Mode != Explore {
		if _, err := m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: user}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Start(ctx, "quick change"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.PlanComplete(ctx, "edit calc.go", "ai"); err != nil || m.Position().State != Exploring {
		t.Fatalf("plan: %v %s", err, m.Position().State)
	}
	b, _ := os.ReadFile(v.dir + "/calc.go")
	v.write(t, "calc.go", string(b)+"\n// Touched in explore mode.\n")
	run := goTest(t, v)
	if run.Status != testrun.Green || run.Coverage == nil {
		t.Fatalf("run %+v", run)
	}
	if _, err := m.RecordTestRun(ctx, run); err != nil || m.Position().State != Reviewing {
		t.Fatalf("validate: %v %s", err, m.Position().State)
	}
	return run
}

// TestDebtBudgetDrops: a coverage drop of 1, 3 and 6 points below the
// baseline gives allow, warn and lock at exploring -> committing.
func TestDebtBudgetDrops(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		drop    float64
		verdict Verdict
	}{{1, BudgetAllow}, {3, BudgetWarn}, {6, BudgetLock}} {
		t.Run(c.verdict.String(), func(t *testing.T) {
			e := newEnv(t, nil)
			m, v := e.session("s", "green")
			// The real coverage of the fixture decides the baseline, so the
			// drop the budget sees is exactly c.drop.
			probe := goTest(t, v)
			base := probe.Coverage.Percent + c.drop
			if err := e.mg.Budget().save(Baseline{Percent: base, UpdatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			exploreToReview(t, e, m, v)
			out, err := m.Review(ctx, Approval{Approved: true, By: "auto", Auto: true})
			bl, _, _ := e.mg.Budget().Load()
			switch c.verdict {
			case BudgetAllow:
				if err != nil || m.Position().State != Committing || out.Warning != "" || bl.Lock != nil {
					t.Fatalf("allow: %+v %v %+v", out, err, bl)
				}
			case BudgetWarn:
				if err != nil || m.Position().State != Committing || !strings.Contains(out.Warning, "3.0 points below") || bl.Lock != nil || m.Status().Warning == "" {
					t.Fatalf("warn: %+v %v %+v", out, err, bl)
				}
			case BudgetLock:
				var te *TransitionError
				if !errors.As(err, &te) || !te.Guard || te.Reason != OnFailBudget || m.Position().State != Reviewing {
					t.Fatalf("lock: %+v %v", out, err)
				}
				if bl.Lock == nil || bl.Lock.Baseline != base || bl.Percent != base {
					t.Fatalf("lock not persisted: %+v", bl)
				}
				// The refusal that locked is durable and names the verdict.
				var found bool
				for _, r := range e.records(audit.EventStateTransition) {
					if r.Metadata["budget"] == "lock" && r.Metadata["refused"] == "true" {
						found = true
					}
				}
				if !found {
					t.Fatal("lock not audited")
				}
			}
			// The explore commit never moves the baseline.
			if c.verdict != BudgetLock {
				if _, err := m.Committed(ctx, "c"); err != nil {
					t.Fatal(err)
				}
				if bl, _, _ := e.mg.Budget().Load(); bl.Percent != base {
					t.Fatalf("explore commit moved the baseline: %+v", bl)
				}
			}
		})
	}
}

// TestDebtLockAndStrictRecovery: a lock blocks explore mode; a strict
// commit below the lock's baseline keeps it, one with a coverage gain
// lifts it.
func TestDebtLockAndStrictRecovery(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		lockAt     float64 // the baseline the lock was taken against
		wantUnlock bool
	}{{"coverage gain unlocks", 60, true}, {"coverage still below keeps the lock", 90, false}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			m, v := e.session("s", "green")
			if err := e.mg.Budget().save(Baseline{Percent: c.lockAt, Lock: &Lock{At: time.Now(), Baseline: c.lockAt, Coverage: c.lockAt - 10}}); err != nil {
				t.Fatal(err)
			}
			// Explore and debug are refused while locked.
			got, err := m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: user})
			if got != Strict || !uerr.HasCode(err, CodeModeRefused) || !strings.Contains(err.Error(), "locked by the tech-debt budget") {
				t.Fatalf("explore while locked: %s %v", got, err)
			}
			// A strict task: a test of Neg (not written yet) is red, the code
			// makes it green, coverage rises above the fixture's 50 %.
			if _, err := m.Start(ctx, "add Neg"); err != nil {
				t.Fatal(err)
			}
			if _, err := m.PlanComplete(ctx, "TestNeg first", "ai"); err != nil {
				t.Fatal(err)
			}
			v.write(t, "neg_test.go", "package calc\n\nimport \"testing\"\n\nfunc TestNeg(t *testing.T) {\n\tif Neg(2) != -2 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n")
			if _, err := m.RecordTestRun(ctx, goTest(t, v)); err != nil || m.Position().State != CodeWriting {
				t.Fatalf("red: %v %s", err, m.Position().State)
			}
			v.write(t, "neg.go", "package calc\n\n// Neg negates x.\nfunc Neg(x int) int { return -x }\n")
			green := goTest(t, v)
			if _, err := m.RecordTestRun(ctx, green); err != nil || m.Position().State != Reviewing {
				t.Fatalf("green: %v %s %+v", err, m.Position().State, green)
			}
			if _, err := m.Review(ctx, Approval{Approved: true, By: "u"}); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Committed(ctx, "c2"); err != nil {
				t.Fatal(err)
			}
			bl, _, _ := e.mg.Budget().Load()
			if bl.Percent != green.Coverage.Percent || bl.Percent <= 50 {
				t.Fatalf("baseline after the strict commit: %+v (run %v)", bl, green.Coverage)
			}
			if (bl.Lock == nil) != c.wantUnlock {
				t.Fatalf("lock after a strict commit at %.1f%% against %.1f%%: %+v", green.Coverage.Percent, c.lockAt, bl.Lock)
			}
			got, err = m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: user})
			if c.wantUnlock != (err == nil && got == Explore) {
				t.Fatalf("explore after recovery: %s %v", got, err)
			}
		})
	}
}

// TestLockSwitchesAnExploreSessionToStrict: a session left in explore mode
// starts its next task in strict mode once the budget is locked.
func TestLockSwitchesAnExploreSessionToStrict(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	m, _ := e.session("s", "")
	if _, err := m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: user}); err != nil {
		t.Fatal(err)
	}
	if err := e.mg.Budget().save(Baseline{Percent: 80, Lock: &Lock{At: time.Now(), Baseline: 80, Coverage: 70}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if p := m.Position(); p.Mode != Strict || p.State != Planning {
		t.Fatalf("position %+v", p)
	}
	recs := e.records(audit.EventSessionModeChange)
	if last := recs[len(recs)-1]; last.Metadata["to_mode"] != "strict" || last.Metadata["decision"] != "budget_locked" {
		t.Fatalf("mode change audit %+v", last)
	}
}

func TestBudgetJudgeAndFile(t *testing.T) {
	dir := t.TempDir()
	b := NewBudget(dir, DefaultDebt(), nil)
	f := func(x float64) *float64 { return &x }
	// No baseline: the first measured explore commit sets it.
	c, err := b.CheckExplore(f(70), "s", "v")
	if err != nil || c.Verdict != BudgetAllow || c.HasBaseline {
		t.Fatalf("%+v %v", c, err)
	}
	if bl, ok, _ := b.Load(); !ok || bl.Percent != 70 {
		t.Fatalf("first baseline %+v", bl)
	}
	for _, x := range []struct {
		cov  float64
		want Verdict
	}{{72, BudgetAllow}, {68, BudgetAllow}, {67.9, BudgetWarn}, {65, BudgetWarn}, {64.9, BudgetLock}} {
		if got := b.judge(Baseline{Percent: 70}, true, f(x.cov)); got.Verdict != x.want {
			t.Errorf("coverage %.1f against 70: %s, want %s", x.cov, got.Verdict, x.want)
		}
	}
	if c, _ := b.CheckExplore(nil, "s", "v"); c.Verdict != BudgetUnmeasured || !c.Verdict.Refused() {
		t.Fatalf("unmeasured: %+v", c)
	}
	if l, _ := b.Locked(); l != nil {
		t.Fatal("an unmeasured commit must not lock")
	}
	if err := os.WriteFile(b.Path(), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CheckExplore(f(70), "s", "v"); !uerr.HasCode(err, CodeBudgetFile) {
		t.Fatalf("corrupt baseline: %v", err)
	}
	// A strict commit measures a fresh baseline over a damaged file.
	if _, _, err := b.StrictCommit(f(75), "s", "v"); err != nil {
		t.Fatal(err)
	}
	if bl, ok, err := b.Load(); !ok || err != nil || bl.Percent != 75 {
		t.Fatalf("%+v %v", bl, err)
	}
}
