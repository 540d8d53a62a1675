package conformance

import (
	"errors"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// TestCallFailedBlamesTheRightParty: a call that timed out is
// reported as a timeout (not "crashed on the malformed arguments" with the
// fix "validate arguments"), a sandbox stopped from outside is not the
// author's fault, and only a broken connection is a crash.
func TestCallFailedBlamesTheRightParty(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       error
		want, not string
	}{
		{"timeout", uerr.New(supervisor.CodeCallTimeout, "plugin x did not answer in time", "deadline", "retry"), "did not answer in time", "crashed"},
		{"killed from outside", uerr.New(sandbox.CodeKilledExternally, "x's sandbox was stopped from outside fluffy", "docker kill", "find it"), "not the plugin's fault", "crashed"},
		{"crash", errors.New("rpc error: code = Unavailable desc = connection reset"), "crashed on", "in time"},
	} {
		o := callFailed("x.run", "the malformed arguments {not json", c.err)
		if o.status != Fail || !strings.Contains(o.msg, c.want) || strings.Contains(o.msg, c.not) {
			t.Errorf("%s: %v %q", c.name, o.status, o.msg)
		}
	}
}
