package fault

import (
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
	"github.com/fluffy-waffle/fluffy/test/harness"
)

var providertestTurns = providertest.OpenAITurns

// slowTest keeps a sandboxed test run busy until it is killed.
const slowTest = `package wordfreq

import (
	"testing"
	"time"
)

func TestSlow(t *testing.T) { time.Sleep(10 * time.Minute) }
`

// TestKernelKilledDuringTestRun: SIGKILL while test.run runs in its
// sandbox. The project is untouched, the session resumes, the next kernel
// removes the dead one's containers, and a task then finishes the change.
func TestKernelKilledDuringTestRun(t *testing.T) {
	u := newUser(t, harness.Turns([]call{harness.Plan()}, []call{harness.Write("slow_test.go", slowTest), harness.TestRun()}))
	tk := u.start("make Count ignore case")
	tk.waitEvent(t, 3*time.Minute, "test.run executing", executing("test.run"))
	time.Sleep(time.Second) // inside go test by now
	u.killKernel()
	tk.wait(t, time.Minute)
	_, _ = told(t, tk, "IPC_CLOSED")
	s := u.recovered(map[string][]string{"wordfreq.go": {wordfreq}, "slow_test.go": {""}})
	t.Logf("after the kill: %+v", s)
	u.finishes()
}
