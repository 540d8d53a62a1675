package kernel

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// SyscallSandboxStart is the syscall the kernel evaluates before it starts a
// plugin in a template that needs the policy's opt-in (integration-test:
// network through the proxy, standard-net seccomp): using
// integration-test needs the policy's explicit authorization.
const SyscallSandboxStart = "sandbox.start"

// AdmitStart implements supervisor.Admission: a plugin whose template
// requires a policy opt-in starts only when the project policy allows
// sandbox.start in that template for it. The decision is audited.
func (k *Kernel) AdmitStart(ctx context.Context, spec supervisor.Spec) error {
	name := spec.Template
	if name == "" {
		name = sandbox.DefaultTemplate(string(spec.Kind))
	}
	tpl, err := sandbox.LookupTemplate(name)
	if err != nil || !tpl.RequiresPolicy {
		return nil // unknown templates are refused by the launcher; "none" needs no opt-in
	}
	req := policy.Request{Syscall: SyscallSandboxStart, Sandbox: tpl.Name, Caller: callerOf(spec, "")}
	t0 := time.Now()
	res := k.Policy.Evaluate(ctx, req)
	k.auditor().RecordDecision(ctx, req, res, time.Since(t0))
	if res.Enforced == policy.Allow {
		return nil
	}
	why := strings.Join(res.Reasons, "; ")
	if why == "" {
		why = "no rule allows it"
	}
	return uerr.New("POLICY_DENIED", fmt.Sprintf("plugin %s may not start in the %s sandbox", spec.Name, tpl.Name),
		fmt.Sprintf("the %s template (network through the proxy) needs the project policy's opt-in, and the policy does not give it: %s", tpl.Name, why),
		fmt.Sprintf("if you want %s to run there, add to .fluffy/policy.yaml: {name: %s-integration-tests, match: {syscall: %s, plugin: %s}, action: allow, constraints: {require_sandbox: %s}}",
			spec.Name, spec.Name, SyscallSandboxStart, spec.Name, tpl.Name))
}
