package merge

import (
	"context"

	"github.com/fluffy-waffle/fluffy/policy"
)

// PolicyJudge is the policy as SensitiveByPolicy asks it (*policy.Engine).
type PolicyJudge interface {
	Evaluate(ctx context.Context, req policy.Request) policy.Result
}

// SensitiveByPolicy is a Sensitive backed by the policy: writing path is
// sensitive unless fs.write of it is allowed outright for base (the
// caller, sandbox, session mode and state the session's writes are judged
// as). The reasons are the policy's.
func SensitiveByPolicy(j PolicyJudge, base policy.Request) Sensitive {
	return func(ctx context.Context, path string) []string {
		req := base
		req.Syscall, req.Path = "fs.write", path
		res := j.Evaluate(ctx, req)
		if res.Enforced == policy.Allow {
			return nil
		}
		if len(res.Reasons) > 0 {
			return res.Reasons
		}
		return []string{"the policy does not allow writing it without review (" + res.Enforced.String() + ")"}
	}
}
