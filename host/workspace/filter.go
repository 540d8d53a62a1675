package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/policy"
)

// Judge is the policy as the workspace asks it (policy.Engine).
type Judge interface {
	Evaluate(ctx context.Context, req policy.Request) policy.Result
	Policy() *policy.Policy
}

// Reader is whom a view is for: the plugin whose sandbox mounts it, and the
// session context the policy sees when it decides what that plugin may
// read.
type Reader struct {
	Caller      policy.Caller
	SessionMode string
	State       string
	// Sandbox is the L2 template the reader runs in ("" = unsandboxed),
	// for rules with require_sandbox.
	Sandbox string
}

// key identifies everything a read decision depends on besides the path:
// the policy in force and the reader. A view whose key changed is re-judged
// path by path.
func (r Reader) key(policyHash string) string {
	c := r.Caller
	tags := slices.Clone(c.Tags)
	slices.Sort(tags)
	hosts := slices.Clone(c.Hosts)
	slices.Sort(hosts)
	h := sha256.New()
	fmt.Fprintf(h, "%q|%q|%q|%q|%q|%q|%q|%q|%q", policyHash, c.Kind, c.Plugin, c.PluginKind,
		strings.Join(tags, ","), strings.Join(hosts, ","), r.SessionMode, r.State, r.Sandbox)
	return hex.EncodeToString(h.Sum(nil))
}

// filter answers "may this reader see this path", asking the policy once
// per path and key. It is used under the view's lock only.
type filter struct {
	judge  Judge
	reader Reader
	key    string
	cache  map[string]bool // path ("dir/" for directories) → visible
}

func newFilter(j Judge, r Reader) *filter {
	hash := ""
	if p := j.Policy(); p != nil {
		hash = p.Hash
	}
	return &filter{judge: j, reader: r, key: r.key(hash), cache: map[string]bool{}}
}

// visible reports whether rel (a cleaned project path) is shown to the
// reader. The kernel's .fluffy directory never is, whatever the policy
// says; everything else is shown only when the policy allows fs.read of it
// outright (review cannot be asked per file, so it hides too).
func (f *filter) visible(ctx context.Context, rel string, dir bool) bool {
	if confine.InKernelDir(rel) {
		return false
	}
	p := rel
	if dir {
		p += "/"
	}
	if v, ok := f.cache[p]; ok {
		return v
	}
	res := f.judge.Evaluate(ctx, policy.Request{Syscall: "fs.read", Path: p, Caller: f.reader.Caller,
		SessionMode: f.reader.SessionMode, State: f.reader.State, Sandbox: f.reader.Sandbox})
	v := res.Enforced == policy.Allow
	f.cache[p] = v
	return v
}
