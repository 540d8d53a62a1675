package main

import (
	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"

	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

// TestMain lets the test binary serve as the confine launcher, as the
// plugin binary does in production (os.Executable is the test binary).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == landlock.Arg {
		landlock.Main(os.Args[2:])
		return
	}
	os.Exit(m.Run())
}

// runInProcess calls the handler directly on the host (real go test, real
// Landlock) and decodes its output the way the kernel does.
func runInProcess(t *testing.T, ws, out string, args string) testrun.Run {
	t.Helper()
	tc := &pluginsdk.ToolContext{Call: tool.Call{ID: "op", OperationID: "op"}, Workspace: ws, OutDir: out, Logger: hclog.NewNullLogger()}
	v, err := runTests(context.Background(), tc, json.RawMessage(args))
	if err != nil {
		t.Fatalf("test.run %s: %v", args, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	r, err := testrun.Decode(b)
	if err != nil {
		t.Fatalf("kernel would refuse %s: %v", b, err)
	}
	return r
}

type classCase struct {
	name, args string
	status     testrun.Status
	check      func(t *testing.T, r testrun.Run)
}

// classCases is the classification table, shared by the in-process and
// the sandboxed test.
var classCases = []classCase{
	{"green", `{"path":"green"}`, testrun.Green, func(t *testing.T, r testrun.Run) {
		if r.Counts != (testrun.Counts{Passed: 1, Skipped: 1}) {
			t.Errorf("counts %+v", r.Counts)
		}
	}},
	{"red assertion", `{"path":"red/..."}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if r.Counts.Failed != 1 || r.Counts.Passed != 1 || r.Tests[0].Name != "TestAdd" || !strings.Contains(r.Tests[0].Message, "want 4") {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"red undefined", `{"path":"undefined"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) != 1 {
			t.Fatalf("build errors %+v", r.BuildErrors)
		}
		be := r.BuildErrors[0]
		if be.File != "undefined/a_test.go" || be.Line != 6 || !be.Undefined || !be.InTestFile || be.Message != "undefined: Sub" {
			t.Errorf("build error %+v", be)
		}
	}},
	// The code under test does not compile: red (a change to the code
	// fixes it), the error listed with its place.
	{"build error", `{"path":"builderr"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) != 1 || r.BuildErrors[0].File != "builderr/a.go" || r.BuildErrors[0].Line != 3 || r.BuildErrors[0].InTestFile {
			t.Errorf("build errors %+v", r.BuildErrors)
		}
		if !strings.Contains(r.Summary, "builderr/a.go:3") {
			t.Errorf("summary %q", r.Summary)
		}
	}},
	{"no tests", `{"path":"notests"}`, testrun.NoTests, nil},
	{"go kata that does not compile", `{"path":"gokata/..."}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		// Every error, past the compiler's ten: Game in the stub, Frame1
		// to Frame12 in the test, and the other package's type error.
		want := map[string]bool{"bowling.go:3 undefined: Game": true, "other/other.go:3 ": true}
		for i := 1; i <= 12; i++ {
			want[fmt.Sprintf("bowling_test.go:%d undefined: Frame%d", 5+i, i)] = true
		}
		for _, be := range r.BuildErrors {
			for w := range want {
				if strings.HasPrefix(strings.TrimPrefix(be.File, "gokata/")+fmt.Sprintf(":%d ", be.Line)+be.Message, w) {
					delete(want, w)
				}
			}
		}
		if len(want) != 0 || len(r.BuildErrors) != 14 {
			t.Errorf("missing %v in %d build errors %+v", want, len(r.BuildErrors), r.BuildErrors)
		}
		pkgs := map[string]bool{}
		for _, p := range failedPackages(r.BuildErrors) {
			pkgs[p] = true
		}
		if !pkgs["example.com/gokata"] || !pkgs["example.com/gokata/other"] || !strings.Contains(r.Summary, "build failed in ") || !strings.Contains(r.Summary, "example.com/gokata/other") {
			t.Errorf("summary %q packages %v: both failing packages must be named", r.Summary, pkgs)
		}
	}},
	{"go module the sandbox cannot fetch", `{"path":"gomissingmod"}`, testrun.BuildFailed, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) == 0 || !strings.Contains(r.BuildErrors[0].Message, "GOPROXY=off") || !strings.Contains(r.Summary, "go mod download") {
			t.Errorf("build errors %+v summary %q", r.BuildErrors, r.Summary)
		}
	}},
	{"go.mod needs a newer go", `{"path":"gotoonew"}`, testrun.BuildFailed, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) != 1 || r.BuildErrors[0].File != "gotoonew/go.mod" || !strings.Contains(r.BuildErrors[0].Message, "requires go >= 1.99") || !strings.Contains(r.Summary, "toolchains") {
			t.Errorf("build errors %+v summary %q", r.BuildErrors, r.Summary)
		}
	}},
	{"coverage", `{"path":"green","coverage":true}`, testrun.Green, func(t *testing.T, r testrun.Run) {
		if r.Coverage == nil || r.Coverage.Percent != 100 || r.Coverage.Files["green/a.go"] != 100 {
			t.Errorf("coverage %+v", r.Coverage)
		}
	}},
	{"panic", `{"path":"panic"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if r.Counts.Failed != 1 || !strings.Contains(r.Tests[0].Message, "assignment to entry in nil map") {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"timeout", `{"path":"sleep","timeout_seconds":20}`, testrun.Timeout, func(t *testing.T, r testrun.Run) {
		if !strings.Contains(r.Summary, "TestSleep") {
			t.Errorf("summary %q does not name the test that hung", r.Summary)
		}
	}},
	{"cannot poison", `{"path":"poison"}`, testrun.Green, nil},
	{"node green", `{"path":"nodegreen"}`, testrun.Green, func(t *testing.T, r testrun.Run) {
		if r.Runner != "node" || r.Counts != (testrun.Counts{Passed: 1}) {
			t.Errorf("runner %s counts %+v", r.Runner, r.Counts)
		}
	}},
	{"node red", `{"path":"nodered"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if r.Counts != (testrun.Counts{Passed: 1, Failed: 1}) || r.Tests[0].Name != "adds" || !strings.Contains(r.Tests[0].Message, "3 !== 4") {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"node red undefined", `{"path":"nodeundefined"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if r.Counts != (testrun.Counts{Failed: 1}) || r.Tests[0].Name != "subs" || !strings.Contains(r.Tests[0].Message, "sub is not a function") {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"node load failure", `{"path":"nodeloadfail"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if r.Counts != (testrun.Counts{Failed: 1}) || r.Tests[0].Name != "nodeloadfail/add.test.js" || r.Tests[0].File != "nodeloadfail/add.test.js" {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"node no tests", `{"path":"nodenotests"}`, testrun.NoTests, nil},
	{"node coverage", `{"path":"nodecov","coverage":true}`, testrun.Green, func(t *testing.T, r testrun.Run) {
		if r.Coverage == nil {
			t.Fatalf("no coverage; summary %q", r.Summary)
		}
		if lib := r.Coverage.Files["nodecov/lib.js"]; lib <= 0 || lib >= 100 || r.Coverage.Percent <= 0 || r.Coverage.Percent >= 100 {
			t.Errorf("coverage %+v: lib.js is partly covered (sub is never called)", r.Coverage)
		}
	}},
	{"pytest coverage is said to be unmeasured", `{"path":"pygreen","coverage":true}`, testrun.Green, func(t *testing.T, r testrun.Run) {
		if r.Coverage != nil || !strings.Contains(r.Summary, "coverage is not measured for pytest") {
			t.Errorf("coverage %+v summary %q", r.Coverage, r.Summary)
		}
	}},
	{"node timeout", `{"path":"nodesleep","timeout_seconds":20}`, testrun.Timeout, nil},
	{"pytest green", `{"path":"pygreen"}`, testrun.Green, func(t *testing.T, r testrun.Run) {
		if r.Runner != "pytest" || r.Counts != (testrun.Counts{Passed: 1, Skipped: 1}) {
			t.Errorf("runner %s counts %+v", r.Runner, r.Counts)
		}
	}},
	{"pytest red assertion", `{"path":"pyred"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if r.Counts != (testrun.Counts{Passed: 1, Failed: 1}) || r.Tests[0].Name != "test_add" || !strings.Contains(r.Tests[0].Message, "assert 3 == 4") {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"pytest red undefined", `{"path":"pyundefined"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) != 1 {
			t.Fatalf("build errors %+v", r.BuildErrors)
		}
		be := r.BuildErrors[0]
		if be.File != "pyundefined/test_calc.py" || be.Line != 1 || !be.Undefined || !be.InTestFile || !strings.HasPrefix(be.Message, "ImportError: cannot import name 'sub'") {
			t.Errorf("build error %+v", be)
		}
	}},
	{"pytest red new module", `{"path":"pynewmod"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) != 1 || r.BuildErrors[0].File != "pynewmod/test_cart.py" || !r.BuildErrors[0].Undefined {
			t.Errorf("build errors %+v", r.BuildErrors)
		}
	}},
	{"pytest build error in code", `{"path":"pybuilderr"}`, testrun.BuildFailed, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) != 1 {
			t.Fatalf("build errors %+v", r.BuildErrors)
		}
		be := r.BuildErrors[0]
		if be.File != "pybuilderr/calc.py" || be.Line != 1 || be.InTestFile || !strings.HasPrefix(be.Message, "ModuleNotFoundError: No module named 'nonexistent_dependency'") {
			t.Errorf("build error %+v", be)
		}
		if !strings.Contains(r.Summary, "pybuilderr/calc.py:1") {
			t.Errorf("summary %q", r.Summary)
		}
	}},
	{"pytest syntax error in test", `{"path":"pysyntax"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) != 1 || r.BuildErrors[0].File != "pysyntax/test_calc.py" || r.BuildErrors[0].Line != 4 || !r.BuildErrors[0].InTestFile || r.BuildErrors[0].Undefined {
			t.Errorf("build errors %+v", r.BuildErrors)
		}
	}},
	{"pytest kata", `{"path":"pykata"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		// The modules that import run (one passes, one fails); the two
		// that do not are listed, each with its place.
		if r.Counts != (testrun.Counts{Passed: 1, Failed: 1}) || r.Tests[0].Name != "test_all_ones" {
			t.Errorf("counts %+v tests %+v", r.Counts, r.Tests)
		}
		got := map[string]bool{}
		for _, be := range r.BuildErrors {
			got[fmt.Sprintf("%s:%d %s", be.File, be.Line, strings.SplitN(be.Message, ":", 2)[0])] = true
		}
		if len(r.BuildErrors) != 2 || !got["pykata/test_frames.py:1 ImportError"] || !got["pykata/test_broken.py:3 SyntaxError"] {
			t.Errorf("build errors %+v", r.BuildErrors)
		}
		if !strings.Contains(r.Summary, "pykata.test_frames") || !strings.Contains(r.Summary, "pykata.test_broken") {
			t.Errorf("summary %q does not name the modules that do not import", r.Summary)
		}
	}},
	{"pytest fixture error", `{"path":"pyfixture"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if r.Counts.Failed != 1 || !strings.Contains(r.Tests[0].Message, "boom") {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"pytest no tests", `{"path":"pynotests"}`, testrun.NoTests, nil},
	{"pytest timeout", `{"path":"pysleep","timeout_seconds":20}`, testrun.Timeout, nil},
	{"pytest cannot poison", `{"path":"pypoison"}`, testrun.Green, nil},
	{"cargo green", `{"path":"cargogreen"}`, testrun.Green, func(t *testing.T, r testrun.Run) {
		// adds and adds_from_outside pass, later is ignored, the doc-test
		// is not run.
		if r.Runner != "cargo" || r.Counts != (testrun.Counts{Passed: 2, Skipped: 1}) {
			t.Errorf("runner %s counts %+v tests %+v", r.Runner, r.Counts, r.Tests)
		}
		pkgs := map[string]bool{}
		for _, tt := range r.Tests {
			pkgs[tt.Name+" "+tt.Package] = true
		}
		if !pkgs["tests::adds cargogreen/src/lib.rs"] || !pkgs["adds_from_outside cargogreen/tests/it.rs"] {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"cargo red assertion", `{"path":"cargored"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if r.Counts != (testrun.Counts{Passed: 1, Failed: 1}) || r.Tests[0].Name != "tests::adds" || !strings.Contains(r.Tests[0].Message, "want 4") {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"cargo red undefined in unit test", `{"path":"cargoundefined"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) != 1 {
			t.Fatalf("build errors %+v", r.BuildErrors)
		}
		be := r.BuildErrors[0]
		if be.File != "cargoundefined/src/lib.rs" || be.Line != 11 || !be.Undefined || !be.InTestFile || !strings.HasPrefix(be.Message, "E0425: cannot find function `sub`") {
			t.Errorf("build error %+v", be)
		}
	}},
	{"cargo red undefined in integration test", `{"path":"cargoitundefined"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) != 1 || r.BuildErrors[0].File != "cargoitundefined/tests/it.rs" || r.BuildErrors[0].Line != 1 || !r.BuildErrors[0].InTestFile {
			t.Errorf("build errors %+v", r.BuildErrors)
		}
	}},
	{"cargo build error", `{"path":"cargobuilderr"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) == 0 || r.BuildErrors[0].File != "cargobuilderr/src/lib.rs" || r.BuildErrors[0].Line != 2 || r.BuildErrors[0].InTestFile {
			t.Errorf("build errors %+v", r.BuildErrors)
		}
		if !strings.Contains(r.Summary, "cargobuilderr/src/lib.rs:2") {
			t.Errorf("summary %q", r.Summary)
		}
	}},
	{"cargo undefined in code", `{"path":"cargocodeundefined"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if len(r.BuildErrors) == 0 || r.BuildErrors[0].File != "cargocodeundefined/src/lib.rs" || !r.BuildErrors[0].Undefined || r.BuildErrors[0].InTestFile {
			t.Errorf("build errors %+v", r.BuildErrors)
		}
	}},
	{"cargo kata", `{"path":"cargokata"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		// Every rustc error: the stub's type error and both missing
		// names in the tests.
		got := map[string]bool{}
		for _, be := range r.BuildErrors {
			code, _, _ := strings.Cut(be.Message, ":")
			got[fmt.Sprintf("%s:%d %s", be.File, be.Line, code)] = true
		}
		for _, w := range []string{"cargokata/src/lib.rs:5 E0308", "cargokata/src/lib.rs:15 E0599", "cargokata/src/lib.rs:16 E0425"} {
			if !got[w] {
				t.Errorf("no %s in build errors %+v", w, r.BuildErrors)
			}
		}
		for _, be := range r.BuildErrors {
			if be.InTestFile != (be.Line > 9) {
				t.Errorf("%+v: only the errors in #[cfg(test)] code are in test code", be)
			}
		}
		if !strings.Contains(r.Summary, "the build failed in cargokata") {
			t.Errorf("summary %q does not name the crate", r.Summary)
		}
	}},
	{"cargo no tests", `{"path":"cargonotests"}`, testrun.NoTests, nil},
	{"cargo abort", `{"path":"cargoabort"}`, testrun.Red, func(t *testing.T, r testrun.Run) {
		if r.Counts.Failed == 0 || r.Tests[0].Name != "tests::aborts" {
			t.Errorf("tests %+v", r.Tests)
		}
	}},
	{"cargo timeout", `{"path":"cargosleep","timeout_seconds":30}`, testrun.Timeout, func(t *testing.T, r testrun.Run) {
		if !strings.Contains(r.Summary, "tests::sleeps") {
			t.Errorf("summary %q does not name the test that hung", r.Summary)
		}
	}},
	{"cargo cannot poison", `{"path":"cargopoison"}`, testrun.Green, nil},
}

// sandboxPath is the PATH a code-executor sandbox gets from the default
// policy's toolchains (/usr/local/go/bin, /usr/bin): the in-process test
// uses the same, so python3 is the system's (with python3-pytest), not a
// version manager's shim earlier on the host's PATH.
func sandboxPath(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(gobin) + ":/usr/bin:/bin"
}

// noBytecode fails if a run left pytest's caches in the project.
func noBytecode(t *testing.T, ws string) {
	t.Helper()
	filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err == nil && (fi.Name() == "__pycache__" || fi.Name() == ".pytest_cache" || fi.Name() == "poisoned-by-test") {
			t.Errorf("a run wrote %s into the project", p)
		}
		return nil
	})
}

func TestClassifyInProcess(t *testing.T) {
	t.Setenv("PATH", sandboxPath(t))
	ws := t.TempDir()
	writeGoFixtures(t, ws)
	out := t.TempDir()
	poison := t.TempDir()
	t.Setenv("POISON_DIR", poison)
	// The build cache's go-build is the host's own: the go command is
	// the only writer (as on the host), and the test stays warm.
	cache := t.TempDir()
	hostCache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(strings.TrimSpace(string(hostCache)), filepath.Join(cache, "go-build")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLUFFY_BUILD_CACHE", cache)
	for _, c := range classCases {
		t.Run(c.name, func(t *testing.T) {
			r := runInProcess(t, ws, out, c.args)
			if r.Status != c.status {
				t.Fatalf("status %s, want %s\nsummary: %s\noutput: %s", r.Status, c.status, r.Summary, r.Output)
			}
			if c.check != nil {
				c.check(t, r)
			}
			if r.LogFile != logName {
				t.Errorf("log file %q", r.LogFile)
			}
		})
	}
	noBytecode(t, ws)
	if es, _ := os.ReadDir(poison); len(es) != 0 {
		t.Fatalf("a test wrote outside its scratch directory: %v", es)
	}
	if _, err := os.Stat(filepath.Join(out, "op", logName)); err != nil {
		t.Fatal(err)
	}
}

// TestFinishBounds: a run with thousands of failures stays a valid,
// bounded result (the router refuses outputs over 2 MiB).
func TestFinishBounds(t *testing.T) {
	r := testrun.Run{Status: testrun.Red, Runner: "go"}
	for i := 0; i < 20000; i++ {
		st := testrun.Fail
		if i%2 == 0 {
			st = testrun.Pass
		}
		r.Tests = append(r.Tests, testrun.Test{Name: "TestX" + strings.Repeat("y", 50), Package: "example.com/p", Status: st, Message: strings.Repeat("m", maxMessageBytes)})
	}
	r.Output = strings.Repeat("o", 1<<20)
	finish(&r)
	b, _ := json.Marshal(r)
	if len(b) > 2<<20 {
		t.Fatalf("result is %d bytes", len(b))
	}
	got, err := testrun.Decode(b)
	if err != nil || got.Counts != (testrun.Counts{Passed: 10000, Failed: 10000}) || got.Status != testrun.Red {
		t.Fatalf("decode: %v counts %+v", err, got.Counts)
	}
	if len(got.Summary)+len(got.Output) > testrun.MaxTextBytes {
		t.Fatalf("text %d bytes", len(got.Summary)+len(got.Output))
	}
}
