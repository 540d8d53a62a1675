package kernel

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/pin"
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
	// Written the way `fluffy policy update` writes: approved (pinned)
	// as it is written, or the default would stay in force.
	approvedWrite(t, home, ws, edited)
	want, err := policy.Load(path, edited)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return k.Policy.Policy().Hash == want.Hash }, "the edited policy to be in force")

	// A broken edit keeps the policy in force.
	approvedWrite(t, home, ws, []byte("rules: [\n"))
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
	approvedWrite(t, home, ws, edited)
	time.Sleep(200 * time.Millisecond)
	after, _ := k.Audit.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventPolicyUpdate}})
	if len(after) != len(refused) {
		t.Fatalf("writing the policy in force was audited again: %d → %d records", len(refused), len(after))
	}
}

// approvedWrite writes the project's policy file through the approval
// store, as `fluffy policy update` and a review's "always" do.
func approvedWrite(t *testing.T, home, ws string, data []byte) {
	t.Helper()
	path := policy.ProjectPath(ws)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := pin.NewStore(home).Written(ws, data, "test", func() error { return policy.WriteAtomic(path, data) }); err != nil {
		t.Fatal(err)
	}
}

// A cloned project's policy file (mode: observe, allow everything) is not
// in force until the user trusts it: the kernel runs the embedded default
// and audits why. Trusting it applies it in the running kernel; swapping
// the file by hand while the kernel runs puts the default back, it does
// not apply the swapped file; a reviewed write applies.
func TestKernelDoesNotApplyAnUntrustedPolicy(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	ctx := context.Background()
	path := policy.ProjectPath(ws)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	cloned := []byte("mode: observe\ncapabilities:\n  - { name: everything, match: { syscall: \"*\" }, action: allow }\n")
	if err := os.WriteFile(path, cloned, 0o644); err != nil {
		t.Fatal(err)
	}
	def, err := policy.Default()
	if err != nil {
		t.Fatal(err)
	}
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, PolicyReloadInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	p := k.Policy.Policy()
	if p.Hash != def.Hash || p.Mode != policy.Enforce || p.Unapproved == nil || p.Unapproved.Hash != pin.Hash(cloned) {
		t.Fatalf("an untrusted cloned policy is in force: %s mode %s unapproved %+v", p.File, p.Mode, p.Unapproved)
	}
	if r := k.Policy.Evaluate(ctx, policy.Request{Syscall: "fs.write", Path: ".env", Caller: policy.Caller{Kind: "plugin", Plugin: "x"}}); r.Enforced != policy.Deny {
		t.Fatalf("the default does not deny a secret write: %+v", r)
	}
	trustRecords := func(via string) int {
		recs, _ := k.Audit.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventPolicyUpdate}})
		n := 0
		for _, r := range recs {
			if r.SyscallType == "policy.trust" && r.PolicyDecision == audit.DecisionDenied && r.Metadata["via"] == via {
				n++
			}
		}
		return n
	}
	if trustRecords("kernel start") != 1 {
		t.Fatal("the untrusted policy at start is not audited")
	}

	// Trusted (fluffy policy trust): the running kernel applies it.
	if err := pin.NewStore(home).Approve(ws, cloned, "fluffy policy trust"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return k.Policy.Policy().Hash == pin.Hash(cloned) }, "the trusted policy to be in force")
	if k.Policy.Policy().Mode != policy.Observe {
		t.Fatal("trusted policy not loaded")
	}

	// Swapped by hand while the kernel runs: not applied, the default is.
	swapped := append(append([]byte(nil), cloned...), "  - { name: net, match: { syscall: net.fetch }, action: allow }\n"...)
	if err := os.WriteFile(path, swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return k.Policy.Policy().Unapproved != nil }, "the default to replace the un-trusted file")
	if p := k.Policy.Policy(); p.Hash != def.Hash || !p.Unapproved.Changed || p.Unapproved.Hash != pin.Hash(swapped) {
		t.Fatalf("after a hand edit: %s %+v", p.File, p.Unapproved)
	}
	if trustRecords("file changed on disk") != 1 {
		t.Fatal("the un-trusted change is not audited")
	}

	// A reviewed write (policy update) applies.
	approvedWrite(t, home, ws, swapped)
	waitFor(t, func() bool { return k.Policy.Policy().Hash == pin.Hash(swapped) }, "the reviewed policy to be in force")
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
