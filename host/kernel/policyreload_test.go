package kernel

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/policy"
)

// `fluffy policy update` (or an editor) changes the file; the running
// kernel judges the next call by it, and says so in the audit log. A file
// that does not load leaves the policy in force.
func TestKernelReloadsTheProjectPolicy(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	ctx := context.Background()
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, PolicyReloadInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	def, err := policy.Default()
	if err != nil {
		t.Fatal(err)
	}
	if k.Policy.Policy().Hash != def.Hash {
		t.Fatal("a project without a policy file runs the default")
	}
	path := policy.ProjectPath(ws)
	edited := append(append([]byte(nil), def.Content...), []byte("\n# edited by the person\n")...)
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := policy.Load(path, edited)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return k.Policy.Policy().Hash == want.Hash }, "the edited policy to be in force")

	// A broken edit keeps the policy in force.
	if err := os.WriteFile(path, []byte("rules: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var refused []audit.Record
	waitFor(t, func() bool {
		refused, _ = k.Audit.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventPolicyUpdate}})
		for _, r := range refused {
			if r.PolicyDecision == audit.DecisionDenied {
				return true
			}
		}
		return false
	}, "the refused reload to be audited")
	if k.Policy.Policy().Hash != want.Hash {
		t.Fatal("a policy file that does not load replaced the one in force")
	}
	var applied int
	for _, r := range refused {
		if r.PolicyDecision != audit.DecisionDenied && r.Metadata["new_hash"] == want.Hash && r.Metadata["old_hash"] == def.Hash && r.Metadata["via"] == "file changed on disk" {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("want one policy_update for the applied edit, records: %+v", refused)
	}

	// The kernel writing the file itself (an approved "always") is not
	// reloaded or audited a second time.
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	after, _ := k.Audit.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventPolicyUpdate}})
	if len(after) != len(refused) {
		t.Fatalf("writing the policy in force was audited again: %d → %d records", len(refused), len(after))
	}
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
