package kernel

import (
	"context"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/textsafe"
)

// watchPolicy hot-reloads the project policy file into the kernel's engine
// (`fluffy policy update`, an editor): a file that loads is swapped in and
// audited as policy_update with both hashes; one that does not load keeps
// the policy in force, and the refusal is audited with the reason.
func (k *Kernel) watchPolicy(path string, interval time.Duration) {
	w := policy.NewWatcher(k.Policy, path, interval, k.log.Named("policy"))
	w.OnReload = func(p *policy.Policy, err error) {
		ctx := context.Background()
		if err != nil {
			_, _ = k.Audit.Append(ctx, audit.Event{
				Type: audit.EventPolicyUpdate, Caller: "user", SyscallType: "policy.reload",
				PolicyDecision: audit.DecisionDenied, DenyReason: textsafe.Line(err.Error(), 500),
				Metadata: map[string]string{"path": path, "kept_hash": k.Policy.Policy().Hash},
			})
			return
		}
		// OnReload runs before the swap: the engine still holds the old one.
		_ = Auditor{Log: k.Audit, Logger: k.log}.RecordPolicyChange(ctx, PolicyChangeRecord{
			Path: path, OldHash: k.Policy.Policy().Hash, NewHash: p.Hash, Via: "file changed on disk",
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
