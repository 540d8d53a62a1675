package fault

import (
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/provider/providertest"
	"github.com/fluffy-waffle/fluffy/test/harness"
)

// TestProviderDropsMidStream: after the plan, every answer of the fake
// provider breaks off mid-stream (the TCP connection closes inside the
// SSE body). The turn is retried, the retries run out, and the task
// fails saying the stream broke off and to try again later; nothing reached the
// project, the session resumes, and the next task finishes the change.
func TestProviderDropsMidStream(t *testing.T) {
	u := newUser(t, nil)
	first := providertestTurns(harness.Turns([]call{harness.Plan()}))[0]
	cut := providertest.Script{Header: first.Header, Drop: true,
		Chunks: []string{providertest.OpenAIRole, providertest.OpenAIText("Let me wri")}}
	u.srv.Play(first, cut)
	tk := u.start("make Count ignore case")
	tk.wait(t, 2*time.Minute)
	_, reason := told(t, tk, "PROVIDER_STREAM_INCOMPLETE")
	// One request for the plan, then the cut turn 4 times: text arrived
	// before the cut, so the plugin does not repeat it, the agent loop
	// does (3 retries).
	if n := len(u.srv.Requests()); n != 5 {
		t.Fatalf("the fake saw %d requests, want 5 (the plan, then the cut turn and 3 retries)", n)
	}
	if !strings.Contains(reason, "broke off") || !strings.Contains(reason, "try again later") {
		t.Fatalf("the task's reason does not say the stream broke and to try again later: %q", reason)
	}
	s := u.recovered(map[string][]string{"wordfreq.go": {wordfreq}})
	t.Logf("after the drop: %+v", s)
	u.finishes()
}
