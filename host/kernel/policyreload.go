package kernel

import (
	"context"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/pin"
)

// watchPolicy hot-reloads the project policy file into the kernel's engine
// (`fluffy policy update`, `fluffy policy trust`, an editor): the file
// applies only while its content is the one the user approved (policy/pin;
// the approval record is watched too), else the embedded default does. A
// new policy in force is swapped in and audited as policy_update with both
// hashes; an unapproved file is audited as a denied policy.trust; a file
// that does not load keeps the policy in force, and the refusal is audited
// with the reason.
func (k *Kernel) watchPolicy(path string, pins *pin.Store, interval time.Duration) {
	w := policy.NewWatcher(k.Policy, path, interval, k.log.Named("policy"))
	w.Source = func() (*policy.Policy, error) { return pin.Load(k.workspace, pins) }
	if rec, err := pins.Path(k.workspace); err == nil {
		w.Also = []string{rec}
	}
	w.OnReload = func(p *policy.Policy, err error) {
		ctx := context.Background()
		old := k.Policy.Policy()
		if err != nil {
			_, _ = k.Audit.Append(ctx, audit.Event{
				Type: audit.EventPolicyUpdate, Caller: "user", SyscallType: "policy.reload",
				PolicyDecision: audit.DecisionDenied, DenyReason: textsafe.Line(err.Error(), 500),
				Metadata: map[string]string{"path": path, "kept_hash": old.Hash},
			})
			return
		}
		// The extensions the new policy names are consulted (and started)
		// before it is swapped in.
		k.connectExtensions(ctx, p)
		if p.Unapproved != nil {
			k.log.Warn(p.Unapproved.Notice())
			_ = Auditor{Log: k.Audit, Logger: k.log}.RecordUnapprovedPolicy(ctx, p.Unapproved, p.Hash, "file changed on disk")
			return
		}
		via := "file changed on disk"
		if old.Unapproved != nil && old.Unapproved.Hash == p.Hash {
			via = "approved: fluffy policy trust"
		}
		// OnReload runs before the swap: the engine still holds the old one.
		_ = Auditor{Log: k.Audit, Logger: k.log}.RecordPolicyChange(ctx, PolicyChangeRecord{
			Path: path, OldHash: old.Hash, NewHash: p.Hash, Via: via,
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.Run(ctx)
	}()
	k.stopPolicyWatch = func() {
		cancel()
		wg.Wait()
	}
}
