package testrun

import (
	"encoding/json"
	"fmt"
	"time"
)

// Status classifies a whole run. The workflow machine trusts only this
// classification, never the runner's exit code or free text.
type Status string

const (
	// Red: at least one test failed, or the project's code or tests do
	// not compile yet (every error is in BuildErrors; Undefined and
	// InTestFile mark a new test's references to code not written yet).
	Red Status = "red"
	// Green: tests ran and all passed.
	Green Status = "green"
	// NoTests: the runner found nothing to run.
	NoTests Status = "no_tests"
	// BuildFailed: the build failed for a reason no change to the code
	// fixes in the sandbox: a module, dependency or toolchain it cannot
	// reach.
	BuildFailed Status = "build_error"
	// Timeout: the run passed its deadline and was killed.
	Timeout Status = "timeout"
	// RunnerError: the runner itself could not run (missing toolchain,
	// crash of the runner).
	RunnerError Status = "runner_error"
)

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	switch s {
	case Red, Green, NoTests, BuildFailed, Timeout, RunnerError:
		return true
	}
	return false
}

// Test outcomes of one test.
const (
	Pass = "pass"
	Fail = "fail"
	Skip = "skip"
)

// Run is the structured result of one test run.
type Run struct {
	Status Status `json:"status"`
	// Runner names the runner used: "go", "pytest", "node", "cargo", ...
	Runner string `json:"runner"`
	// Command is the argv that ran (for the person reading the log).
	Command []string `json:"command,omitempty"`
	Tests   []Test   `json:"tests,omitempty"`
	// BuildErrors are compile/collection errors with their location.
	BuildErrors []BuildError `json:"build_errors,omitempty"`
	Counts      Counts       `json:"counts"`
	DurationMS  int64        `json:"duration_ms"`
	// Summary is a short human text (bounded by the plugin, sanitized by
	// the kernel); never used for classification.
	Summary string `json:"summary,omitempty"`
	// Output is the head/tail of the runner's text output, capped.
	Output string `json:"output,omitempty"`
	// LogFile is the full log's path relative to the call's output
	// directory (/out/<operation>/), if the plugin wrote one.
	LogFile  string    `json:"log_file,omitempty"`
	Coverage *Coverage `json:"coverage,omitempty"`
	// ViewHash identifies the exact tree the run was computed on. The
	// kernel sets it from the view it mounted for the call; a value sent
	// by the plugin is ignored.
	ViewHash string `json:"view_hash,omitempty"`
}

// Test is one test's outcome.
type Test struct {
	Name       string `json:"name"`
	Package    string `json:"package,omitempty"`
	Status     string `json:"status"` // pass, fail, skip
	DurationMS int64  `json:"duration_ms,omitempty"`
	// File is where the test lives, relative to the project, when known.
	File string `json:"file,omitempty"`
	// Message is the failure output, capped.
	Message string `json:"message,omitempty"`
}

// BuildError is one compile or collection error.
type BuildError struct {
	File    string `json:"file,omitempty"` // relative to the project
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Package string `json:"package,omitempty"`
	Message string `json:"message"`
	// Undefined is set when the error is a reference to a name that does
	// not exist (Go `undefined: X`, Python ImportError of a missing name,
	// rustc E0425 and the other missing-name codes):
	// in a test file the session wrote, that makes the run red.
	Undefined bool `json:"undefined,omitempty"`
	// InTestFile: File is a test file by the runner's own convention.
	InTestFile bool `json:"in_test_file,omitempty"`
}

// Counts summarises the tests.
type Counts struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}

// Coverage is an optional coverage summary.
type Coverage struct {
	// Percent is total statement (or line) coverage, 0..100.
	Percent float64 `json:"percent"`
	// Files maps a project-relative path to its coverage percent.
	Files map[string]float64 `json:"files,omitempty"`
}

// Duration returns DurationMS as a time.Duration.
func (r Run) Duration() time.Duration { return time.Duration(r.DurationMS) * time.Millisecond }

// Limits bound what the kernel accepts from a plugin.
const (
	MaxTests       = 10000
	MaxBuildErrors = 1000
	MaxTextBytes   = 10 << 10
)

// Decode parses and validates a plugin's test.run output. It refuses
// unknown statuses, inconsistent counts and oversized lists rather than
// guessing: a malformed result must never count as red or green.
func Decode(b []byte) (Run, error) {
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return Run{}, fmt.Errorf("decode test run: %w", err)
	}
	if !r.Status.Valid() {
		return Run{}, fmt.Errorf("decode test run: unknown status %q", r.Status)
	}
	if len(r.Tests) > MaxTests || len(r.BuildErrors) > MaxBuildErrors {
		return Run{}, fmt.Errorf("decode test run: %d tests / %d build errors exceed the limits (%d / %d)", len(r.Tests), len(r.BuildErrors), MaxTests, MaxBuildErrors)
	}
	if r.Counts.Passed < 0 || r.Counts.Failed < 0 || r.Counts.Skipped < 0 {
		return Run{}, fmt.Errorf("decode test run: negative counts %+v", r.Counts)
	}
	if r.Status == Green && r.Counts.Failed > 0 {
		return Run{}, fmt.Errorf("decode test run: status green with %d failed tests", r.Counts.Failed)
	}
	if r.Status == Green && r.Counts.Passed == 0 {
		return Run{}, fmt.Errorf("decode test run: status green but no test passed")
	}
	r.ViewHash = "" // the kernel's to set
	return r, nil
}
