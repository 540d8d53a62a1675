package policyverbs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/store"
)

// Trusting a project's file pins it (it is then the policy in force, and
// compared with itself next time) and records the approval in the
// project's audit log when no kernel holds it.
func TestTrustPinsAndRecords(t *testing.T) {
	ctx := context.Background()
	home, project := t.TempDir(), t.TempDir()
	path := ProjectPath(project)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	content := []byte("mode: observe\ncapabilities:\n  - { name: everything, match: { syscall: \"*\" }, action: allow }\n")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	v := New(home, nil)
	steps := []struct {
		name             string
		approve          bool
		trusted, observe bool
		baseName         string
	}{
		{name: "before", approve: true, trusted: false, observe: true, baseName: "the embedded default policy"},
		{name: "after", trusted: true, observe: true, baseName: "the version you trusted last"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			tr, err := v.PrepareTrust(project, path, content)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Trusted != s.trusted || tr.Observe != s.observe || tr.BaseName != s.baseName {
				t.Fatalf("trust = {trusted %v observe %v base %q}, want {%v %v %q}", tr.Trusted, tr.Observe, tr.BaseName, s.trusted, s.observe, s.baseName)
			}
			p, err := v.Active(project)
			if err != nil {
				t.Fatal(err)
			}
			if inForce := p.Hash == tr.Policy.Hash; inForce != s.trusted {
				t.Fatalf("the file is in force: %v, want %v", inForce, s.trusted)
			}
			if s.approve {
				if err := tr.Approve(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	l, err := audit.Open(ctx, audit.Options{Dir: store.DefaultDir(project), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	recs, err := l.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventPolicyUpdate}})
	if err != nil || len(recs) != 1 || recs[0].Metadata["via"] != "approved: fluffy policy trust" {
		t.Fatalf("policy_update records: %+v %v, want the one approval", recs, err)
	}
}
