package state

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// toTestWriting opens a strict session over fixture with the fixture's
// test files removed, and drives it to test_writing. The test files are
// then written back by the "session" (after the gate allowed each one),
// so the changeset holds exactly the tests the session wrote.
func toTestWriting(t *testing.T, e *env, id, fixture string, write ...string) (*Machine, *dirView) {
	t.Helper()
	ctx := context.Background()
	m, v := e.session(id, fixture)
	contents := map[string]string{}
	for _, p := range write {
		b, err := os.ReadFile(filepath.Join(v.dir, p))
		if err != nil {
			// A file the fixture lacks: a vacuous test that always passes.
			name := strings.NewReplacer(".", "_", "/", "_").Replace(p)
			b = []byte("package calc\n\nimport \"testing\"\n\nfunc TestVacuous_" + name + "(t *testing.T) {}\n")
		}
		contents[p] = string(b)
		_ = os.Remove(filepath.Join(v.dir, p))
	}
	if _, err := m.Start(ctx, "add a feature"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.PlanComplete(ctx, "test first, then the code", "ai"); err != nil {
		t.Fatal(err)
	}
	if st := m.Position().State; st != TestWriting {
		t.Fatalf("after plan.complete: %s", st)
	}
	for _, p := range write {
		if err := m.Allowed("fs.write", p, true); err != nil {
			t.Fatalf("gate refuses the test %s in test_writing: %v", p, err)
		}
		v.write(t, p, contents[p])
	}
	return m, v
}

// TestRedGuardOnRealRuns feeds the test_writing -> code_writing guard with
// real `go test -json` results of real fixture modules.
func TestRedGuardOnRealRuns(t *testing.T) {
	cases := []struct {
		name, fixture string
		write         []string // test files the session wrote
		mutate        func(t *testing.T, v *dirView)
		wantOpen      bool // code_writing reached
		status        testrun.Status
		detail        string // substring of the refusal
	}{
		{name: "failing test", fixture: "red", write: []string{"calc_test.go"}, wantOpen: true, status: testrun.Red},
		{name: "test of a function that does not exist yet", fixture: "undefined", write: []string{"calc_test.go"}, wantOpen: true, status: testrun.Red},
		// The spec's guard is "tests exist, were run, at least one fails",
		// whoever wrote them: "make the failing tests pass" is a task.
		{name: "pre-existing failing test, nothing written", fixture: "red", wantOpen: true, status: testrun.Red},
		{name: "pre-existing test of a missing function, another test written", fixture: "undefined", write: []string{"other_test.go"}, wantOpen: true, status: testrun.Red},
		{name: "package with tests does not build", fixture: "builderr", wantOpen: true, status: testrun.Red},
		{name: "no tests", fixture: "notests", status: testrun.NoTests, detail: "no_tests"},
		{name: "all tests pass", fixture: "green", write: []string{"calc_test.go"}, status: testrun.Green, detail: "green"},
		{name: "pre-existing tests pass, nothing written", fixture: "green", status: testrun.Green, detail: "green"},
		{name: "vacuous test written beside passing tests", fixture: "green", write: []string{"vacuous_test.go"}, status: testrun.Green, detail: "green"},
		{name: "only a vacuous test", fixture: "notests", write: []string{"vacuous_test.go"}, status: testrun.Green, detail: "green"},
		{name: "runner cannot run", fixture: "nomodule", write: []string{"calc_test.go"}, status: testrun.RunnerError, detail: "runner_error"},
		{name: "stale red run", fixture: "red", write: []string{"calc_test.go"}, status: testrun.Red, detail: "stale",
			mutate: func(t *testing.T, v *dirView) { v.write(t, "calc_extra_test.go", "package calc\n") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil)
			ctx := context.Background()
			m, v := toTestWriting(t, e, "s1", c.fixture, c.write...)
			run := goTest(t, v)
			if run.Status != c.status {
				t.Fatalf("fixture %s ran as %s, want %s: %+v", c.fixture, run.Status, c.status, run)
			}
			if c.mutate != nil {
				c.mutate(t, v)
			}
			out, err := m.RecordTestRun(ctx, run)
			if c.wantOpen {
				if err != nil || m.Position().State != CodeWriting || out.To != CodeWriting {
					t.Fatalf("RecordTestRun = %+v, %v; state %s", out, err, m.Position().State)
				}
				if err := m.Allowed("fs.write", "calc.go", true); err != nil {
					t.Fatalf("source not writable after red: %v", err)
				}
				if err := m.Allowed("fs.write", "calc_test.go", true); err == nil {
					t.Fatal("test file writable in code_writing")
				}
				st := m.Status()
				if st.LastRun == nil || st.LastRun.Status != testrun.Red {
					t.Fatalf("status %+v", st)
				}
				return
			}
			var te *TransitionError
			if !errors.As(err, &te) || !te.Guard || te.Reason != OnFailRed || !strings.Contains(te.Detail, c.detail) {
				t.Fatalf("RecordTestRun err = %v, want the red guard's refusal mentioning %q", err, c.detail)
			}
			if m.Position().State != TestWriting {
				t.Fatalf("state moved to %s", m.Position().State)
			}
			if err := m.Allowed("fs.write", "calc.go", true); err == nil {
				t.Fatal("source writable without a red run")
			}
			// The refusal is on record.
			var found bool
			for _, r := range e.records(audit.EventStateTransition) {
				if r.Metadata["refused"] == "true" && r.Metadata["event"] == string(EvTestsRed) && strings.Contains(r.DenyReason, OnFailRed) {
					found = true
				}
			}
			if !found {
				t.Fatal("refused tests_red not audited")
			}
		})
	}
}

// TestStrictFlowOnRealRuns drives one strict task end to end on real runs:
// a test of a missing function (red), the code (green), review, commit.
func TestStrictFlowOnRealRuns(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	m, v := toTestWriting(t, e, "s1", "undefined", "calc_test.go")
	if _, err := m.RecordTestRun(ctx, goTest(t, v)); err != nil {
		t.Fatal(err)
	}
	// A run before any code change is informative: still code_writing.
	if out, err := m.RecordTestRun(ctx, goTest(t, v)); err != nil || len(out.Events) != 0 || m.Position().State != CodeWriting {
		t.Fatalf("unchanged tree: %+v %v", out, err)
	}
	// A wrong implementation: validating, then back to code_writing.
	v.write(t, "mul.go", "package calc\n\n// Mul multiplies.\nfunc Mul(a, b int) int { return a + b }\n")
	out, err := m.RecordTestRun(ctx, goTest(t, v))
	if err != nil || m.Position().State != CodeWriting || len(out.Events) != 2 || out.Events[1] != EvTestsFailed {
		t.Fatalf("failing validation: %+v %v", out, err)
	}
	// A green run that has gone stale does not validate.
	v.write(t, "mul.go", "package calc\n\n// Mul multiplies.\nfunc Mul(a, b int) int { return a * b }\n")
	green := goTest(t, v)
	if green.Status != testrun.Green {
		t.Fatalf("run %+v", green)
	}
	v.write(t, "README.md", "calc\n")
	var te *TransitionError
	if _, err := m.RecordTestRun(ctx, green); !errors.As(err, &te) || te.Reason != OnFailStale {
		t.Fatalf("stale green run: %v", err)
	}
	out, err = m.RecordTestRun(ctx, goTest(t, v))
	if err != nil || m.Position().State != Reviewing {
		t.Fatalf("green validation: %+v %v", out, err)
	}
	for _, p := range []string{"mul.go", "calc_test.go", "README.md"} {
		if err := m.Allowed("fs.write", p, true); err == nil {
			t.Fatalf("%s writable while reviewing", p)
		}
	}
	if _, err := m.Review(ctx, Approval{Approved: true, By: "auto", Auto: true}); err != nil || m.Position().State != Committing {
		t.Fatalf("approve: %v %s", err, m.Position().State)
	}
	if _, err := m.Committed(ctx, "abc123"); err != nil || m.Position().State != Idle {
		t.Fatalf("committed: %v %s", err, m.Position().State)
	}
	// The strict commit set the baseline from the validated run.
	bl, ok, err := e.mg.Budget().Load()
	if err != nil || !ok || green.Coverage == nil || bl.Percent != green.Coverage.Percent {
		t.Fatalf("baseline %+v %v %v", bl, ok, err)
	}
	h, err := m.History(0)
	if err != nil {
		t.Fatal(err)
	}
	var path []string
	for _, x := range h {
		path = append(path, string(x.To))
	}
	want := "idle planning test_writing code_writing validating code_writing validating reviewing committing idle"
	if strings.Join(path, " ") != want {
		t.Fatalf("history %v\nwant %s", path, want)
	}
	if n := len(e.records(audit.EventStateTransition)); n < len(h) {
		t.Fatalf("%d audit records for %d transitions", n, len(h))
	}
}
