package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/policyext"
)

// PolicyBudget is the time an extension has for one decision.
const PolicyBudget = 100 * time.Millisecond

func policyChecks() map[string]checkFunc {
	return map[string]checkFunc{
		"POLICY-LATENCY-001":   checkPolicyLatency,
		"POLICY-DECISION-001":  checkPolicyDecisions,
		"POLICY-MALFORMED-001": checkPolicyMalformed,
	}
}

func (p *probe) policyBlocked() (outcome, bool) {
	if p.m != nil && p.m.Kind != manifests.KindPolicy {
		return na("the plugin is a %s plugin", p.m.Kind), true
	}
	return p.blocked()
}

var policyRequests = []policyext.Request{
	{Syscall: "fs.read", Path: "src/main.go", CallerPlugin: "tool-fs", SessionMode: "strict", State: "RED"},
	{Syscall: "fs.write", Path: "src/main.go", SizeBytes: 120, CallerPlugin: "tool-fs", SessionMode: "strict", State: "GREEN"},
	{Syscall: "fs.write", Path: ".env", CallerPlugin: "tool-fs", SessionMode: "explore"},
	{Syscall: "net.connect", Host: "api.example.com:443", CallerPlugin: "provider-openai", CallerTags: []string{"third_party"}},
	{Syscall: "process.exec", ArgsJSON: []byte(`{"argv":["go","test","./..."]}`), SessionMode: "debug"},
}

func (p *probe) evaluate(ctx context.Context, req policyext.Request) (policyext.Decision, error) {
	var d policyext.Decision
	err := p.use(ctx, func(ctx context.Context, raw any) error {
		var err error
		d, err = raw.(policyext.Client).Evaluate(ctx, req)
		return err
	})
	return d, err
}

func checkPolicyLatency(ctx context.Context, p *probe) outcome {
	if o, stop := p.policyBlocked(); stop {
		return o
	}
	_, _ = p.evaluate(ctx, policyRequests[0]) // warm-up
	var worst time.Duration
	for i := 0; i < 4; i++ {
		for _, r := range policyRequests {
			t0 := time.Now()
			_, err := p.evaluate(ctx, r)
			d := time.Since(t0)
			if d > worst {
				worst = d
			}
			if uerr.HasCode(err, supervisor.CodeCrashed) && !uerr.HasCode(err, base.CodeMalformed) {
				return fail("Evaluate(%s) crashed the extension: %s", r.Syscall, errText(err))
			}
			if err != nil {
				// A malformed answer makes the kernel restart the extension
				// (judged by POLICY-DECISION-001); warm it again untimed.
				_, _ = p.evaluate(ctx, policyRequests[0])
				continue
			}
			if d > PolicyBudget {
				return fail("Evaluate(%s %s) took %s; the budget is %s (the kernel treats a late answer as deny)\nfix: decide from the request alone; cache anything slow at Configure", r.Syscall, r.Path+r.Host, d.Round(time.Millisecond), PolicyBudget)
			}
		}
	}
	return pass("%d evaluations, slowest %s (budget %s)", 4*len(policyRequests), worst.Round(time.Microsecond), PolicyBudget)
}

func checkPolicyDecisions(ctx context.Context, p *probe) outcome {
	if o, stop := p.policyBlocked(); stop {
		return o
	}
	seen := map[string]int{}
	for _, r := range policyRequests {
		d, err := p.evaluate(ctx, r)
		if uerr.HasCode(err, base.CodeMalformed) {
			return fail("Evaluate(%s) answered a decision outside allow/deny/require_review/pass: %s", r.Syscall, errText(err))
		}
		if err != nil && !isStructured(err) {
			return fail("Evaluate(%s) failed: %s", r.Syscall, errText(err))
		}
		seen[d.Decision]++
	}
	return pass("decisions %v", seen)
}

func checkPolicyMalformed(ctx context.Context, p *probe) outcome {
	if o, stop := p.policyBlocked(); stop {
		return o
	}
	bad := []policyext.Request{{}, {Syscall: "fs.read", ArgsJSON: []byte("{not json")}}
	for i, r := range bad {
		d, err := p.evaluate(ctx, r)
		switch {
		case err == nil && d.Decision != policyext.Deny:
			return fail("malformed request #%d (%q) got %q; answer deny or a structured error", i+1, r.Syscall, d.Decision)
		case err != nil && !isStructured(err):
			return fail("malformed request #%d (%q) crashed the extension: %s\nfix: validate the request and return a *uerr.Error", i+1, r.Syscall, errText(err))
		}
	}
	if err := p.use(ctx, func(ctx context.Context, raw any) error { return raw.(baseOf).Health(ctx) }); err != nil {
		return fail("after malformed requests the extension is unhealthy: %s", errText(err))
	}
	return pass("%d malformed requests, each denied or refused with a structured error", len(bad))
}

var _ = fmt.Sprint
