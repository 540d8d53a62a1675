package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/policy"
)

// TestPolicyUpdateReplaysAuditedDecisions: the trial run of `policy update`
// replays the decisions the audit log recorded, marks allow→deny as
// [BREAKING], and the applied update is itself a durable audit event.
func TestPolicyUpdateReplaysAuditedDecisions(t *testing.T) {
	project := t.TempDir()
	ctx := context.Background()
	log, err := audit.Open(ctx, audit.Options{Dir: store.DefaultDir(project)})
	if err != nil {
		t.Fatal(err)
	}
	a := kernel.Auditor{Log: log}
	allowAll, _ := policy.Load("p.yaml", []byte("capabilities:\n  - name: writes\n    match: {syscall: fs.write}\n    action: allow\n"))
	eng := policy.NewEngine(allowAll, policy.Options{})
	for _, p := range []string{"src/a.go", "src/b.go", "docs/x.md"} {
		req := policy.Request{Syscall: "fs.write", Path: p, Caller: policy.Caller{Kind: "plugin", Plugin: "tool-fs"}}
		a.RecordDecision(ctx, req, eng.Evaluate(ctx, req), time.Millisecond)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	newPolicy := filepath.Join(t.TempDir(), "new.yaml")
	os.WriteFile(newPolicy, []byte("capabilities:\n  - name: docs-only\n    match: {syscall: fs.write, path_glob: \"docs/**\"}\n    action: allow\n"), 0o644)

	c := newCLI(t)
	out, errOut, code := c.run("policy", "update", "--project", project, "--yes", newPolicy)
	if code != 0 {
		t.Fatalf("update: %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "replayed 3 recorded decisions") || strings.Count(out, "[BREAKING]") != 2 || !strings.Contains(out, "src/a.go") {
		t.Fatalf("trial output:\n%s", out)
	}
	log, err = audit.Open(ctx, audit.Options{Dir: store.DefaultDir(project)})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	recs, err := log.Recent(ctx, 1, audit.EventPolicyUpdate)
	if err != nil || len(recs) != 1 || recs[0].Metadata["breaking"] != "2" {
		t.Fatalf("policy_update event: %v %+v", err, recs)
	}
}
