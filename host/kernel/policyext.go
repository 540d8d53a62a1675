package kernel

import (
	"context"
	"fmt"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/policyext"
	"github.com/fluffy-waffle/fluffy/policy"
)

// PolicyExtension adapts a policy-kind plugin run by the supervisor to the
// policy engine's Extension interface. The engine owns the 100 ms deadline
// and the crash/timeout/malformed → deny rule; the supervisor kills a
// plugin that overruns it, and Restart brings a fresh one up.
type PolicyExtension struct {
	Plugins *supervisor.Supervisor
	Plugin  string
}

// Name is the plugin's name.
func (p PolicyExtension) Name() string { return p.Plugin }

// Evaluate asks the plugin for a verdict.
func (p PolicyExtension) Evaluate(ctx context.Context, req policy.Request) (policy.Verdict, error) {
	var d policyext.Decision
	err := p.Plugins.Use(ctx, p.Plugin, base.KindPolicy, func(ctx context.Context, raw any) error {
		c, ok := raw.(policyext.Client)
		if !ok {
			return fmt.Errorf("plugin %s dispensed %T, not a policy extension", p.Plugin, raw)
		}
		var err error
		d, err = c.Evaluate(ctx, policyext.Request{
			Syscall: req.Syscall, Path: req.Path, Host: req.Host, SizeBytes: req.Size,
			CallerPlugin: req.Caller.Plugin, CallerTags: req.Caller.Tags,
			SessionMode: req.SessionMode, State: req.State,
		})
		return err
	})
	if err != nil {
		return policy.Verdict{}, err
	}
	a, ok := policy.ParseAction(d.Decision)
	if !ok {
		return policy.Verdict{}, fmt.Errorf("%w: %q", policy.ErrMalformed, d.Decision)
	}
	reason := d.Reason
	if d.Rule != "" && reason != "" {
		reason = d.Rule + ": " + reason
	}
	return policy.Verdict{Action: a, Reason: reason}, nil
}

// Restart replaces the plugin's instance.
func (p PolicyExtension) Restart(ctx context.Context) error {
	return p.Plugins.Restart(ctx, p.Plugin)
}
