package policyverbs

import (
	"context"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/pin"
)

// Trust is a project's policy file waiting to be trusted.
type Trust struct {
	project string
	v       Verbs
	Path    string
	content []byte
	// Policy is the file loaded (a file that does not load is not
	// trusted: it would not apply).
	Policy *Policy
	// Trusted: this content is already the policy in force.
	Trusted bool
	// Observe: the file's mode denies nothing.
	Observe bool
	// Base is the text the file is shown against, BaseName what it is.
	Base, BaseName string
}

// PrepareTrust loads the project's policy file (its content read from
// path) and finds what it is compared with: the version trusted last, else
// the embedded default.
func (v Verbs) PrepareTrust(project, path string, content []byte) (*Trust, error) {
	p, err := policy.Load(path, content)
	if err != nil {
		return nil, err
	}
	rec, err := pin.NewStore(v.home).Lookup(project)
	if err != nil {
		return nil, err
	}
	t := &Trust{project: project, v: v, Path: path, content: content, Policy: p,
		Trusted: rec.Approves(p.Hash), Observe: p.Mode == policy.Observe,
		Base: string(policy.DefaultYAML()), BaseName: "the embedded default policy"}
	if rec != nil && rec.Content != "" {
		t.Base, t.BaseName = rec.Content, "the version you trusted last"
	}
	return t, nil
}

// Approve pins the file's content as trusted and says so in the project's
// audit log; a running kernel holds the log, and records the change
// itself when it applies the file.
func (t *Trust) Approve(ctx context.Context) error {
	if err := pin.NewStore(t.v.home).Approve(t.project, t.content, "fluffy policy trust"); err != nil {
		return err
	}
	if log, err := audit.Open(ctx, audit.Options{Dir: store.DefaultDir(t.project), Logger: t.v.log}); err == nil {
		old := ""
		if def, err := policy.Default(); err == nil {
			old = def.Hash
		}
		_ = kernel.Auditor{Log: log, Logger: t.v.log}.RecordPolicyChange(ctx, kernel.PolicyChangeRecord{
			Path: t.Path, OldHash: old, NewHash: t.Policy.Hash, Via: "approved: fluffy policy trust",
		})
		log.Close()
	}
	return nil
}
