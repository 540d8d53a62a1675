package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/test/harness"
)

// hogTest allocates past the sandbox's memory limit, touching every page.
const hogTest = `package wordfreq

import "testing"

func TestHog(t *testing.T) {
	var keep [][]byte
	for i := 0; i < 64; i++ {
		b := make([]byte, 64<<20)
		for j := range b {
			if j%4096 == 0 {
				b[j] = 1
			}
		}
		keep = append(keep, b)
	}
	t.Log(len(keep))
}
`

// TestTestRunOOMKilled: a test allocates past the sandbox's memory limit
// (1 GiB for code-executor) and the kernel OOM-kills it. The run is a
// runner_error (its summary says the memory limit killed a test process), not a red run (which
// would open source writing on a failure no assertion made); the
// workflow stays in test_writing and the same task goes on to a commit.
func TestTestRunOOMKilled(t *testing.T) {
	u := newUser(t, harness.Turns([]call{harness.Plan()},
		[]call{harness.Write("hog_test.go", hogTest), harness.TestRun()},
		[]call{harness.Write("hog_test.go", "package wordfreq\n"), harness.Write("case_test.go", caseTest), harness.TestRun()},
		[]call{harness.Write("wordfreq.go", wordfreqFixed), harness.TestRun()}))
	tk := u.start("make Count ignore case")
	tk.wait(t, 3*time.Minute)
	var runs []string
	var first *event
	for _, ev := range tk.events(t) {
		if ev.Type == "tool_result" && ev.Tool != nil && ev.Tool.Name == "test.run" {
			if first == nil {
				e := ev
				first = &e
			}
			runs = append(runs, ev.Tool.TestStatus)
		}
	}
	// The model reads the plugin's summary (the memory limit killed a
	// test process); the event carries the kernel's one-line status.
	if first == nil || first.Tool.TestStatus != "runner_error" {
		t.Fatalf("the OOM-killed run is not a runner_error naming the memory limit: %+v (runs %v)", first.Tool, runs)
	}
	if strings.Join(runs, " ") != "runner_error red green" {
		t.Fatalf("test runs %v, want runner_error red green", runs)
	}
	done := tk.finished(t)
	if tk.code != 0 || done == nil || done.Done.Status != "done" || done.Done.Commit == "" {
		t.Fatalf("exit %d, done %+v\nstderr:\n%s", tk.code, done, tk.stderr.String())
	}
	u.recovered(map[string][]string{"wordfreq.go": {wordfreqFixed}, "case_test.go": {caseTest}})
}
