package kernel

import (
	"context"
	"sync"
	"time"
)

// DefaultRetentionInterval is how often a running kernel applies audit
// retention: besides once at start, every hour, so a
// kernel that runs for days keeps both logs within their age and size
// bounds. Size-based removal still never touches a record younger than
// Retention.MinAge; that rule lives in audit.ApplyRetention.
const DefaultRetentionInterval = time.Hour

// TokenSweepInterval is how often the kernel removes expired and used-up
// capability tokens, recording capability_expired for each.
const TokenSweepInterval = 10 * time.Second

// maintenance runs the kernel's periodic chores in one goroutine until
// Close: audit retention of the project and home logs every
// retentionEvery, and the capability token sweep every TokenSweepInterval. stop cancels it and waits, so no goroutine outlives the
// kernel and no chore runs against a closed database.
type maintenance struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (k *Kernel) startMaintenance(retentionEvery time.Duration) {
	if retentionEvery <= 0 {
		retentionEvery = DefaultRetentionInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &maintenance{cancel: cancel}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		retention := time.NewTicker(retentionEvery)
		defer retention.Stop()
		sweep := time.NewTicker(k.tokenSweepEvery)
		defer sweep.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-retention.C:
				k.applyRetention(ctx)
			case <-sweep.C:
				k.sweepTokens(ctx)
			}
		}
	}()
	k.maint = m
}

// applyRetention applies retention to the project log and the home log. A
// failure is logged and retried at the next tick; it never stops the
// kernel.
func (k *Kernel) applyRetention(ctx context.Context) {
	if k.Audit != nil {
		if _, err := k.Audit.ApplyRetention(ctx); err != nil && ctx.Err() == nil {
			k.log.Warn("audit retention failed", "log", "project", "error", err)
		}
	}
	if k.HomeAudit != nil {
		if _, err := k.HomeAudit.ApplyRetention(ctx); err != nil && ctx.Err() == nil {
			k.log.Warn("audit retention failed", "log", "home", "error", err)
		}
	}
}

func (m *maintenance) stop() {
	if m == nil {
		return
	}
	m.cancel()
	m.wg.Wait()
}

// sweepTokens removes the capability tokens that expired or have no
// operations left, and records capability_expired for each.
func (k *Kernel) sweepTokens(ctx context.Context) {
	if k.Policy == nil {
		return
	}
	for _, t := range k.Policy.Tokens().Sweep(time.Now()) {
		k.auditor().RecordCapabilityEnd(ctx, t, "expired or used up")
	}
}

// revokeTokens removes the tokens of an instance that stopped.
func (k *Kernel) revokeTokens(ctx context.Context, instanceID string) {
	if k.Policy == nil || instanceID == "" {
		return
	}
	for _, t := range k.Policy.Tokens().RevokeInstance(instanceID) {
		k.auditor().RecordCapabilityEnd(ctx, t, "its plugin instance stopped")
	}
}
