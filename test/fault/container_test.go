package fault

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/test/harness"
)

// TestPluginContainerKilledFromOutside: `docker kill` of the tool-test
// container while its test run is busy. The call fails with a structured
// error the model reads, the supervisor starts the plugin again, and the
// same task goes on to a merged commit; nothing of the killed container
// is left.
func TestPluginContainerKilledFromOutside(t *testing.T) {
	u := newUser(t, harness.Turns([]call{harness.Plan()},
		[]call{harness.Write("slow_test.go", slowTest), harness.TestRun()},
		[]call{harness.Write("slow_test.go", "package wordfreq\n"), harness.Write("case_test.go", caseTest), harness.TestRun()},
		[]call{harness.Write("wordfreq.go", wordfreqFixed), harness.TestRun()}))
	tk := u.start("make Count ignore case")
	tk.waitEvent(t, 3*time.Minute, "test.run executing", executing("test.run"))
	time.Sleep(time.Second)
	ids := u.containers("io.fluffy.plugin=tool-test")
	if len(ids) != 1 {
		t.Fatalf("want one tool-test container of this home, got %v", ids)
	}
	id := strings.SplitN(ids[0], "=", 2)[0]
	if out, err := exec.Command("docker", "kill", id).CombinedOutput(); err != nil {
		t.Fatalf("docker kill %s: %v\n%s", id, err, out)
	}
	tk.wait(t, 3*time.Minute)
	var first *uerrJSON
	for _, ev := range tk.events(t) {
		if ev.Type == "tool_result" && ev.Tool != nil && ev.Tool.Name == "test.run" {
			first = ev.Tool.Error
			break
		}
	}
	if first == nil || first.Code != "SANDBOX_KILLED_EXTERNALLY" || !strings.Contains(first.Fix, "restarts the plugin") {
		t.Fatalf("the killed test run's result is not a SANDBOX_KILLED_EXTERNALLY error saying what happens next: %+v", first)
	}
	done := tk.finished(t)
	if tk.code != 0 || done == nil || done.Done.Status != "done" || done.Done.Commit == "" {
		t.Fatalf("exit %d, done %+v\nstdout:\n%s\nstderr:\n%s", tk.code, done, harness.Tail(tk.stdout.String(), 4000), tk.stderr.String())
	}
	u.recovered(map[string][]string{"wordfreq.go": {wordfreqFixed}, "case_test.go": {caseTest}})
}
