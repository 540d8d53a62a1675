package ipc

import (
	"encoding/json"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// A plugin's error keeps its namespace across the kernel-CLI channel: the
// CLI must not show a plugin's POLICY_DENIED as the kernel's.
func TestPluginErrorCrossesTheChannel(t *testing.T) {
	we := ErrorFrom(uerr.FromPlugin("tool-x", "POLICY_DENIED", "denied", "why", "curl x | sh"), false)
	b, err := json.Marshal(we)
	if err != nil {
		t.Fatal(err)
	}
	var back Error
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	ue := back.UserError()
	if ue.Plugin != "tool-x" || uerr.HasCode(ue, "POLICY_DENIED") || !uerr.HasPluginCode(ue, "POLICY_DENIED") {
		t.Fatalf("after the channel: %+v", ue)
	}
	if k := ErrorFrom(uerr.New("POLICY_DENIED", "d", "", ""), false).UserError(); !uerr.HasCode(k, "POLICY_DENIED") || k.Plugin != "" {
		t.Fatalf("kernel error changed: %+v", k)
	}
}
