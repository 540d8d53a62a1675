package state

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/testpaths"
)

func TestClassifyLanguageDefaults(t *testing.T) {
	r := DefaultRules()
	cases := []struct {
		path string
		want PathClass
	}{
		{"calc_test.go", ClassTest},
		{"pkg/calc/calc_test.go", ClassTest},
		{"pkg/calc/testdata/in.json", ClassTest}, // test data beats the config_change glob
		{"testdata/golden.txt", ClassTest},
		{"test_app.py", ClassTest},
		{"pkg/app_test.py", ClassTest},
		{"tests/unit/app.py", ClassTest},
		{"src/pkg/tests/helpers.py", ClassTest},
		{"src/app.test.ts", ClassTest},
		{"web/button.spec.js", ClassTest},
		{"web/__tests__/button.js", ClassTest},
		{"crates/core/tests/integration.rs", ClassTest},
		{"csv_test.go", ClassTest},
		{"mypkg/conftest.py", ClassTest},
		{"lib/__tests__/parse.js", ClassTest},
		{"test/parse.js", ClassTest},
		{"csv.go", ClassSource},
		{"mypkg/core.py", ClassSource},
		{"lib/parse.js", ClassSource},
		{"benches/bench.rs", ClassSource},
		{"calc.go", ClassSource},
		{"cmd/main.go", ClassSource},
		{"app.py", ClassSource},
		{"testing.go", ClassSource},
		{"contest.py", ClassSource},
		{"src/lib.rs", ClassSource},
		{"README.md", ClassExempt},
		{"docs/guide.md", ClassExempt},
		{"config/app.yaml", ClassExempt},
		{".github/workflows/ci.yml", ClassExempt},
		{"Dockerfile", ClassExempt},
		{"types/index.d.ts", ClassExempt},
		{"assets/logo.svg", ClassExempt},
		{"src/index.ts", ClassSource},
	}
	for _, c := range cases {
		if got := r.Classify(c.path); got != c.want {
			t.Errorf("Classify(%q) = %s, want %s", c.path, got, c.want)
		}
	}
}

func TestGateTable(t *testing.T) {
	r := DefaultRules()
	doc := &Exemption{Category: Documentation, Paths: []string{"README.md"}}
	type want int
	const (
		ok want = iota
		refused
		review
	)
	cases := []struct {
		name  string
		pos   Position
		tool  string
		path  string
		write bool
		want  want
		why   string // substring of the reason
	}{
		{"idle read", Position{Idle, Strict, nil}, "fs.read", "calc.go", false, refused, "idle"},
		{"idle set_mode", Position{Idle, Strict, nil}, ToolSetMode, "", false, ok, ""},
		{"planning read", Position{Planning, Strict, nil}, "fs.read", "calc.go", false, ok, ""},
		{"planning write test", Position{Planning, Strict, nil}, "fs.write", "calc_test.go", true, refused, "planning"},
		{"planning plan.complete", Position{Planning, Strict, nil}, ToolPlanComplete, "", false, ok, ""},
		{"planning test.run", Position{Planning, Strict, nil}, ToolTestRun, "", false, ok, ""},
		{"test_writing plan.complete", Position{TestWriting, Strict, nil}, ToolPlanComplete, "", false, refused, "past it"},
		{"test_writing write test", Position{TestWriting, Strict, nil}, "fs.write", "calc_test.go", true, ok, ""},
		{"test_writing write testdata", Position{TestWriting, Strict, nil}, "fs.write", "testdata/in.txt", true, ok, ""},
		{"test_writing write source", Position{TestWriting, Strict, nil}, "fs.write", "calc.go", true, refused, "source file"},
		{"test_writing delete source", Position{TestWriting, Strict, nil}, "fs.delete", "calc.go", true, refused, "red"},
		{"test_writing write doc", Position{TestWriting, Strict, nil}, "fs.write", "README.md", true, refused, "exemption"},
		{"test_writing read source", Position{TestWriting, Strict, nil}, "fs.read", "calc.go", false, ok, ""},
		{"test_writing exemption", Position{TestWriting, Strict, nil}, ToolRequestExemption, "", false, ok, ""},
		{"code_writing write source", Position{CodeWriting, Strict, nil}, "fs.write", "calc.go", true, ok, ""},
		{"code_writing write exempt", Position{CodeWriting, Strict, nil}, "fs.write", "README.md", true, ok, ""},
		{"code_writing write test", Position{CodeWriting, Strict, nil}, "fs.write", "calc_test.go", true, refused, "read-only"},
		{"code_writing exemption", Position{CodeWriting, Strict, nil}, ToolRequestExemption, "", false, refused, "strict mode while planning"},
		{"validating write", Position{Validating, Strict, nil}, "fs.write", "calc.go", true, refused, "validate"},
		{"validating test.run", Position{Validating, Strict, nil}, ToolTestRun, "", false, ok, ""},
		{"reviewing write", Position{Reviewing, Strict, nil}, "fs.write", "calc.go", true, refused, "reviewed"},
		{"reviewing test.run", Position{Reviewing, Strict, nil}, ToolTestRun, "", false, refused, "reviewing"},
		{"committing write", Position{Committing, Strict, nil}, "fs.write", "calc_test.go", true, refused, "committed"},
		{"exploring write source", Position{Exploring, Explore, nil}, "fs.write", "calc.go", true, ok, ""},
		{"exploring write test", Position{Exploring, Explore, nil}, "fs.write", "calc_test.go", true, ok, ""},
		{"exempt write granted", Position{Exploring, Strict, doc}, "fs.write", "README.md", true, ok, ""},
		{"exempt write ./granted", Position{Exploring, Strict, doc}, "fs.write", "./README.md", true, ok, ""},
		{"exempt write other doc", Position{Exploring, Strict, doc}, "fs.write", "CHANGELOG.md", true, refused, "covers only README.md"},
		{"exempt write source", Position{Exploring, Strict, doc}, "fs.write", "main.go", true, refused, "covers only"},
		{"retro write test", Position{RetroactiveTesting, Explore, nil}, "fs.write", "calc_test.go", true, ok, ""},
		{"retro write source", Position{RetroactiveTesting, Explore, nil}, "fs.write", "calc.go", true, refused, "only test files"},
		{"strict shell", Position{Exploring, Explore, nil}, ToolShellExec, "", false, refused, "debug mode"},
		{"debug shell", Position{Exploring, Debug, nil}, ToolShellExec, "", false, review, "approves"},
		{"debug container", Position{Planning, Debug, nil}, ToolContainerRun, "", false, review, ""},
		{"debug shell reviewing", Position{Reviewing, Debug, nil}, ToolShellExec, "", false, refused, "planning or exploring"},
		{"strict container", Position{CodeWriting, Strict, nil}, ToolContainerRun, "", false, refused, "debug mode"},
		{"write without path", Position{CodeWriting, Strict, nil}, "fs.write", "", true, refused, "name the path"},
		{"write escaping path", Position{CodeWriting, Strict, nil}, "fs.write", "../x.go", true, refused, "project-relative"},
		{"write absolute path", Position{CodeWriting, Strict, nil}, "fs.write", "/etc/passwd", true, refused, "project-relative"},
		{"test escape to source", Position{TestWriting, Strict, nil}, "fs.write", "x_test.go/../calc.go", true, refused, "project-relative"},
		{"write directory", Position{TestWriting, Strict, nil}, "fs.write", "tests/", true, refused, "directory"},
		{"unknown read tool", Position{CodeWriting, Strict, nil}, "lint.check", "calc.go", false, ok, ""},
		{"unknown write tool", Position{TestWriting, Strict, nil}, "format.apply", "calc.go", true, refused, "source file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := r.Allowed(c.pos, c.tool, c.path, c.write)
			var tu *ToolUnavailableError
			var rv *ReviewRequiredError
			switch c.want {
			case ok:
				if err != nil {
					t.Fatalf("Allowed = %v, want nil", err)
				}
			case refused:
				if !errors.As(err, &tu) {
					t.Fatalf("Allowed = %v, want *ToolUnavailableError", err)
				}
				if !strings.Contains(tu.Reason, c.why) || tu.State != c.pos.State || tu.Tool != c.tool {
					t.Fatalf("refusal %+v, want reason containing %q", tu, c.why)
				}
				if !uerr.HasCode(err, CodeToolUnavailable) {
					t.Fatalf("no TOOL_UNAVAILABLE code: %v", err)
				}
				if slices.Contains(tu.Available, c.tool) && !c.write {
					t.Fatalf("refused tool listed as available: %v", tu.Available)
				}
			case review:
				if !errors.As(err, &rv) || !strings.Contains(rv.Reason, c.why) {
					t.Fatalf("Allowed = %v, want *ReviewRequiredError", err)
				}
			}
		})
	}
}

func TestToolUnavailableJSONIsSeedShape(t *testing.T) {
	err := DefaultRules().Allowed(Position{State: TestWriting, Mode: Strict}, "fs.write", "calc.go", true)
	b, _ := json.Marshal(err)
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		t.Fatal(string(b))
	}
	for _, k := range []string{"error", "tool_name", "current_state", "reason", "available_tools"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("field %s missing in %s", k, b)
		}
	}
	if m["error"] != "tool_unavailable" || m["current_state"] != "test_writing" {
		t.Fatalf("bad JSON %s", b)
	}
	av := m["available_tools"].([]any)
	if !slices.Contains(av, any("fs.write")) || !slices.Contains(av, any("test.run")) || slices.Contains(av, any("plan.complete")) {
		t.Fatalf("available tools in test_writing: %v", av)
	}
}

func TestAvailableWithCatalog(t *testing.T) {
	r := DefaultRules()
	cat := []ToolInfo{{"fs.read", false}, {"fs.write", true}, {"lint.fix", true}, {ToolTestRun, false}}
	got := r.Available(Position{State: Reviewing, Mode: Strict}, cat)
	if !slices.Equal(got, []string{"fs.read"}) {
		t.Fatalf("available in reviewing = %v", got)
	}
	got = r.Available(Position{State: CodeWriting, Mode: Strict}, cat)
	if !slices.Equal(got, []string{"fs.read", "fs.write", "lint.fix", "test.run"}) {
		t.Fatalf("available in code_writing = %v", got)
	}
}

func TestExplain(t *testing.T) {
	r := DefaultRules()
	e := r.Explain(Position{State: TestWriting, Mode: Strict}, "calc.go")
	if e.Writable || e.Class != "source" || !strings.Contains(e.Reason, "red") || e.Fix == "" {
		t.Fatalf("explain calc.go in test_writing: %+v", e)
	}
	e = r.Explain(Position{State: CodeWriting, Mode: Strict}, "calc.go")
	if !e.Writable || !strings.Contains(e.Reason, "source path") {
		t.Fatalf("explain calc.go in code_writing: %+v", e)
	}
	e = r.Explain(Position{State: TestWriting, Mode: Strict}, "docs/a.md")
	if e.Writable || e.Class != "exempt" || !slices.Equal(e.Exempt, []string{"documentation"}) {
		t.Fatalf("explain docs/a.md: %+v", e)
	}
}

func TestRulesFromPolicy(t *testing.T) {
	load := func(t *testing.T, yaml string) (*Rules, error) {
		t.Helper()
		p, err := policy.Load("p.yaml", []byte("version: 1\n"+yaml))
		if err != nil {
			t.Fatalf("policy load: %v", err)
		}
		return RulesFromPolicy(p)
	}
	t.Run("defaults", func(t *testing.T) {
		r, err := load(t, "")
		if err != nil || !r.IsTest("a_test.go") || r.Debt() != DefaultDebt() {
			t.Fatalf("%v %+v", err, r)
		}
	})
	t.Run("override one language, add one, remove one", func(t *testing.T) {
		r, err := load(t, "test_paths:\n  go: [\"*_test.go\"]\n  e2e: [\"/e2e/\"]\n  rust: []\n")
		if err != nil {
			t.Fatal(err)
		}
		if r.IsTest("testdata/x.txt") || !r.IsTest("e2e/login.go") || !r.IsTest("a_test.go") || !r.IsTest("test_a.py") {
			t.Fatalf("test paths: %v", r.TestPaths())
		}
		if _, ok := r.TestPaths()["rust"]; ok {
			t.Fatal("rust not removed")
		}
	})
	t.Run("seed exemptions and tech_debt", func(t *testing.T) {
		r, err := load(t, `tdd_exemptions:
  documentation:
    path_glob: ["*.md", "*.rst"]
  asset_update:
    path_glob: []
tech_debt:
  coverage:
    baseline_file: ".fluffy/coverage-baseline.json"
    min_delta: 0
    warning_threshold: -3
    lockout_threshold: -8
  lockout_action: block_explore
  recovery: "strict_mode_with_coverage_gain"
`)
		if err != nil {
			t.Fatal(err)
		}
		if r.Classify("a.rst") != ClassExempt || r.Classify("logo.png") != ClassSource || r.Debt() != (DebtConfig{Warn: 3, Lockout: 8}) {
			t.Fatalf("rules: %v %+v", r.Exemptions(), r.Debt())
		}
	})
	bad := []struct{ name, yaml, want string }{
		{"condition", "tdd_exemptions:\n  type_refactor:\n    path_glob: [\"*.ts\"]\n    condition: type_only_change\n", "condition is not supported"},
		{"unknown category", "tdd_exemptions:\n  refactor:\n    path_glob: [\"*.go\"]\n", "unknown exemption category"},
		{"no path_glob", "tdd_exemptions:\n  documentation: {}\n", "no path_glob"},
		{"baseline elsewhere", "tech_debt:\n  coverage:\n    baseline_file: cov.json\n", "baseline_file must be"},
		{"positive threshold", "tech_debt:\n  coverage:\n    warning_threshold: 2\n", "between -100 and 0"},
		{"lock before warn", "tech_debt:\n  coverage:\n    warning_threshold: -5\n    lockout_threshold: -2\n", "lockout cannot come before"},
		{"min_delta", "tech_debt:\n  coverage:\n    min_delta: -1\n", "min_delta must be 0"},
		{"unknown key", "tech_debt:\n  budget: 3\n", "unknown field"},
	}
	// test_paths is read by the policy loader (one table for the policy's
	// path_class and this gate): a bad one stops the policy from loading.
	for _, c := range []struct{ name, yaml, want string }{
		{"bad glob", "test_paths:\n  go: [\"[\"]\n", "bad glob"},
		{"not a list", "test_paths:\n  go: \"*_test.go\"\n", "must be a list"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := policy.Load("p.yaml", []byte("version: 1\n"+c.yaml))
			if !uerr.HasCode(err, testpaths.CodeInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %s containing %q", err, testpaths.CodeInvalid, c.want)
			}
		})
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(t, c.yaml)
			if !uerr.HasCode(err, CodeConfigInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %s containing %q", err, CodeConfigInvalid, c.want)
			}
			if ue, _ := uerr.As(err); !strings.HasPrefix(ue.Context, "p.yaml") {
				t.Fatalf("no file:line context: %+v", ue)
			}
		})
	}
}
