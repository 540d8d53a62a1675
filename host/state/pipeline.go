package state

import (
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Stage is one step of a task's work as the scheduler runs it.
type Stage string

// Stages of a task.
const (
	StagePlan     Stage = "plan"
	StageTestGen  Stage = "test_gen"
	StageCodeGen  Stage = "code_gen"
	StageValidate Stage = "validate"
	StageReview   Stage = "review"
	StageCommit   Stage = "commit"
)

// stageDeps: the machine builds
// the dependency graph, the scheduler respects it. Strict mode makes code
// generation wait for test generation (test-first); explore and debug
// make it wait only for the plan, and tests, if any, come after the code.
var stageDeps = map[Flow]map[Stage][]Stage{
	FlowStrict: {
		StageTestGen: {StagePlan}, StageCodeGen: {StageTestGen}, StageValidate: {StageCodeGen},
		StageReview: {StageValidate}, StageCommit: {StageReview},
	},
	FlowExplore: {
		StageCodeGen: {StagePlan}, StageTestGen: {StageCodeGen}, StageValidate: {StageCodeGen},
		StageReview: {StageValidate}, StageCommit: {StageReview},
	},
}

// StageDeps returns the stages s waits for in flow f.
func StageDeps(f Flow, s Stage) []Stage { return append([]Stage(nil), stageDeps[f][s]...) }

// Pipeline gives each stage's task id (ids) its dependencies' task ids in
// flow f. A stage without a task is passed through (whoever waits for it
// waits for what it would have waited for), except that the strict flow
// refuses code generation without test generation.
func Pipeline(f Flow, ids map[Stage]string) (map[string][]string, error) {
	_, code := ids[StageCodeGen]
	_, tests := ids[StageTestGen]
	if f == FlowStrict && code && !tests {
		return nil, uerr.New(CodeGuardFailed, "strict mode has no code generation without test generation first",
			OnFailRed, "add a test_gen stage for the code_gen stage to wait for")
	}
	var resolve func(s Stage, seen map[Stage]bool) []string
	resolve = func(s Stage, seen map[Stage]bool) []string {
		var out []string
		for _, d := range stageDeps[f][s] {
			if seen[d] {
				continue
			}
			seen[d] = true
			if id, ok := ids[d]; ok {
				out = append(out, id)
				continue
			}
			out = append(out, resolve(d, seen)...)
		}
		return out
	}
	deps := map[string][]string{}
	for s, id := range ids {
		deps[id] = resolve(s, map[Stage]bool{})
	}
	return deps, nil
}
