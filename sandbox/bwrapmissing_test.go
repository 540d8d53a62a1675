package sandbox

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Without bubblewrap on PATH the bwrap sandbox says bubblewrap is missing
// and how to install it, not that no container engine answered.
func TestBwrapMissingNamesBubblewrap(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	b := &Bwrap{Lease: tenv.lease}
	_, err := b.Prepare(context.Background(), LaunchSpec{Name: "p", InstanceID: "1", Binary: tenv.hostile}, &plugin.ClientConfig{})
	if err == nil {
		t.Fatal("Prepare succeeded without bubblewrap")
	}
	ue := uerr.From(err)
	msg := ue.Render()
	for _, tc := range []struct {
		what string
		ok   bool
	}{
		{"code " + CodeBwrapUnavailable, ue.Code == CodeBwrapUnavailable},
		{"says bubblewrap is not installed", strings.Contains(msg, "bubblewrap is not installed")},
		{"install advice", strings.Contains(msg, "apt install bubblewrap")},
		{"no container-engine claim", !strings.Contains(msg, "container engine")},
	} {
		if !tc.ok {
			t.Errorf("%s: got %s", tc.what, msg)
		}
	}
}
