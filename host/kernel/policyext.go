package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/manifests"
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

// missingExtension stands for an extension the policy names but this
// kernel cannot run (not installed, disabled, rejected, not a policy
// plugin, or not in the policy-sandbox template). The policy asked for its
// judgement, so its absence denies every request that reaches the
// extension layer, with the reason: a policy never gets more permissive
// because a plugin is missing.
type missingExtension struct{ name, why string }

func (m missingExtension) Name() string { return m.name }

func (m missingExtension) Evaluate(context.Context, policy.Request) (policy.Verdict, error) {
	return policy.Verdict{Action: policy.Deny, Reason: m.why}, nil
}

func (m missingExtension) Restart(context.Context) error { return nil }

// extensionWarmup bounds the warm-up evaluation that starts each
// extension when the kernel opens or the policy names a new one.
const extensionWarmup = 60 * time.Second

// connectExtensions makes the engine consult the extensions p names, in
// order, as the policy-kind plugins this kernel loaded, and warms each up
// (pre-loaded at start so the first real call does not pay the
// process start within its 100 ms).
func (k *Kernel) connectExtensions(ctx context.Context, p *policy.Policy) {
	xs := make([]policy.Extension, 0, len(p.Extensions))
	for _, name := range p.Extensions {
		spec, ok := k.Plugins.Spec(name)
		switch {
		case !ok:
			xs = append(xs, missingExtension{name, fmt.Sprintf("policy extension %s (named in %s) is not loaded: install and enable it (`fluffy plugin install`, `fluffy plugin enable %s`) or remove it from extensions:", name, p.File, name)})
		case spec.Kind != base.KindPolicy:
			xs = append(xs, missingExtension{name, fmt.Sprintf("policy extension %s (named in %s) is a %s plugin, not a policy plugin: remove it from extensions:", name, p.File, spec.Kind)})
		case spec.Template != "" && spec.Template != manifests.TemplatePolicySandbox:
			xs = append(xs, missingExtension{name, fmt.Sprintf("policy extension %s (named in %s) asks for the %s sandbox; policy extensions run only in policy-sandbox", name, p.File, spec.Template)})
		default:
			xs = append(xs, PolicyExtension{Plugins: k.Plugins, Plugin: name})
		}
	}
	k.Policy.SetExtensions(xs)
	if len(xs) == 0 {
		return
	}
	if k.progress != nil {
		k.progress("starting the policy's extensions")
	}
	wctx, cancel := context.WithTimeout(ctx, extensionWarmup)
	defer cancel()
	if err := k.Policy.Warm(wctx, extensionWarmup); err != nil {
		k.log.Warn("a policy extension did not start; it denies until it answers", "error", err)
		if k.progress != nil {
			k.progress("warning: " + textsafe.Line(err.Error(), 300))
		}
	}
}
