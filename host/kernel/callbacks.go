package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

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

func (c *callbacks) caller() policy.Caller {
	return policy.Caller{Kind: "plugin", Plugin: c.spec.Name, PluginKind: string(c.spec.Kind), Instance: c.instance, Tags: c.spec.Tags, Hosts: c.spec.Network}
}

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

// ReadFile reads a project file on the plugin's behalf, after the policy
// allowed fs.read of it; the read is confined to the workspace.
func (c *callbacks) ReadFile(ctx context.Context, p string, maxBytes int64) ([]byte, string, error) {
	clean := path.Clean(strings.ReplaceAll(p, "\\", "/"))
	if err := c.judge(ctx, policy.Request{Syscall: "fs.read", Path: p, Caller: c.caller()}); err != nil {
		return nil, "", err
	}
	root, err := os.OpenRoot(c.k.workspace)
	if err != nil {
		return nil, "", err
	}
	defer root.Close()
	f, err := root.Open(clean)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", uerr.Wrap(err, "FS_NOT_FOUND", clean+" does not exist", "no such file in the project", "check the path")
	}
	if err != nil {
		return nil, "", uerr.Wrap(err, "FS_PATH_ESCAPES", "cannot read "+clean, err.Error(), "use a path inside the project")
	}
	defer f.Close()
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
