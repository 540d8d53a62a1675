package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/confine"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/kernel"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/token"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// callbacks is the kernel service one plugin instance reaches through its
// GRPCBroker. Every call is attributed to that instance: a plugin cannot
// ask on another's behalf, and tokens are bound to it.
type callbacks struct {
	k        *Kernel
	instance string
	spec     supervisor.Spec
}

var _ kernel.Service = (*callbacks)(nil)

func (k *Kernel) kernelService(instanceID string, spec supervisor.Spec) kernel.Service {
	return &callbacks{k: k, instance: instanceID, spec: spec}
}

func (c *callbacks) caller() policy.Caller { return callerOf(c.spec, c.instance) }

func (c *callbacks) judge(ctx context.Context, req policy.Request) error {
	t0 := time.Now()
	res := c.k.Policy.Evaluate(ctx, req)
	c.k.auditor().RecordDecision(ctx, req, res, time.Since(t0))
	if res.Enforced == policy.Allow {
		return nil
	}
	what := "denied"
	if res.Enforced == policy.RequireReview {
		what = "needs review"
	}
	return uerr.New("POLICY_DENIED", fmt.Sprintf("%s of %s by %s %s", req.Syscall, req.Path, c.spec.Name, what),
		strings.Join(res.Reasons, "; "), "see `fluffy policy explain --syscall "+req.Syscall+" --path "+req.Path+"`")
}

// RequestCapability issues a token bound to this instance when the policy
// allows the syscall on that exact path outright.
func (c *callbacks) RequestCapability(ctx context.Context, syscall, pathGlob string, maxOps int, ttl time.Duration) (base.Capability, error) {
	req := policy.Request{Syscall: syscall, Path: pathGlob, Caller: c.caller()}
	t0 := time.Now()
	tok, res, err := c.k.Policy.Issue(ctx, req, token.Scope{Syscall: syscall, MaxOps: maxOps, TTL: ttl})
	c.k.auditor().RecordDecision(ctx, req, res, time.Since(t0))
	if err != nil {
		return base.Capability{}, err
	}
	if tok.ID == "" {
		return base.Capability{}, uerr.New("POLICY_DENIED", fmt.Sprintf("no capability for %s on %s", syscall, pathGlob),
			strings.Join(res.Reasons, "; "), "capabilities are only issued where the policy allows the syscall outright")
	}
	c.k.auditor().RecordCapability(ctx, c.spec.Name, c.instance, tok)
	return base.Capability{TokenID: tok.ID, Expires: tok.Expires}, nil
}

// ReadFile reads a file on the plugin's behalf, from the plugin's own
// view of the session (the project with the changeset applied, minus what
// the policy denies it). The path is cleaned and judged as fs.read; when a
// symbolic link leads elsewhere, the path it resolves to is judged too, so
// a link named docs/notes.txt cannot read .env.
func (c *callbacks) ReadFile(ctx context.Context, p string, maxBytes int64) ([]byte, string, error) {
	clean, err := confine.Clean(p)
	if err != nil {
		return nil, "", err
	}
	if err := c.judge(ctx, policy.Request{Syscall: "fs.read", Path: clean, Caller: c.caller()}); err != nil {
		return nil, "", err
	}
	root, err := c.k.Session.ViewRoot(c.spec.Name)
	if err != nil {
		return nil, "", err
	}
	defer root.Close()
	f, canon, err := root.Open(clean)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	if canon != clean {
		if err := c.judge(ctx, policy.Request{Syscall: "fs.read", Path: canon, Caller: c.caller()}); err != nil {
			return nil, "", err
		}
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, "", uerr.New("FS_NOT_FILE", clean+" is not a regular file", "only files can be read", "use a file path")
	}
	if maxBytes <= 0 || maxBytes > 8<<20 {
		maxBytes = 8 << 20
	}
	b, err := io.ReadAll(io.LimitReader(f, maxBytes))
	if err != nil {
		return nil, "", err
	}
	h := sha256.Sum256(b)
	return b, hex.EncodeToString(h[:]), nil
}

// ReportProgress passes a plugin's progress line to whoever shows progress.
func (c *callbacks) ReportProgress(_ context.Context, message string, fraction float64) error {
	if c.k.progress != nil {
		c.k.progress(fmt.Sprintf("%s: %s", c.spec.Name, message))
	}
	return nil
}
