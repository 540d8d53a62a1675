package callbacks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/token"
)

// judge allows what allow names and denies the rest.
type judge struct{ allow map[string]bool }

func (j judge) Evaluate(_ context.Context, req policy.Request) policy.Result {
	if j.allow[req.Syscall+" "+req.Path] {
		return policy.Result{Decision: policy.Allow, Enforced: policy.Allow}
	}
	return policy.Result{Decision: policy.Deny, Enforced: policy.Deny, Reasons: []string{"not allowed here"}}
}

func (j judge) Issue(context.Context, policy.Request, token.Scope) (token.Token, policy.Result, error) {
	return token.Token{}, policy.Result{Enforced: policy.Deny}, nil
}

// recorder keeps what the service audits.
type recorder struct {
	mu        sync.Mutex
	events    []audit.Event
	decisions []policy.Request
}

func (r *recorder) Record(_ context.Context, ev audit.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) RecordDecision(_ context.Context, req policy.Request, _ policy.Result, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decisions = append(r.decisions, req)
}

func (r *recorder) RecordRefusal(ctx context.Context, req policy.Request, _ policy.Result, _ time.Duration, why, id string) {
	r.Record(ctx, audit.Event{SyscallType: req.Syscall, DenyReason: why, CapabilityID: id})
}

func (r *recorder) RecordCapability(context.Context, string, string, token.Token) {}

// TestReadFileIsDeclaredJudgedAndAudited: the service alone, on a real
// directory: an undeclared syscall is refused before the policy is asked,
// a denied path is refused after it, an allowed one is read from the
// instance's view, and each is attributed to the instance.
func TestReadFileIsDeclaredJudgedAndAudited(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		caps      []string
		path      string
		wantCode  string
		wantBody  string
		decisions int
		events    int
	}{
		{"undeclared", nil, "a.txt", CodeCapabilityUndeclared, "", 0, 1},
		{"denied", []string{"fs.read"}, ".env", "POLICY_DENIED", "", 1, 0},
		{"allowed", []string{"fs.read"}, "a.txt", "", "hello", 1, 0},
		{"outside", []string{"fs.read"}, "../x", "FS_PATH_ESCAPES", "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			s := New(Deps{
				Judge: judge{allow: map[string]bool{"fs.read a.txt": true}},
				Audit: rec,
				View:  func(string) (*confine.Root, error) { return confine.OpenRoot(dir) },
			}, Instance{ID: "inst-1", Plugin: "tool-x", Capabilities: tc.caps, Caller: policy.Caller{Kind: "plugin", Plugin: "tool-x", Instance: "inst-1"}})
			b, _, err := s.ReadFile(context.Background(), tc.path, 0, base.TokenUse{})
			switch {
			case tc.wantCode == "" && err != nil:
				t.Fatalf("ReadFile(%s): %v", tc.path, err)
			case tc.wantCode != "" && (err == nil || !strings.HasPrefix(uerr.From(err).Code, tc.wantCode)):
				t.Fatalf("ReadFile(%s): %v, want %s", tc.path, err, tc.wantCode)
			}
			if string(b) != tc.wantBody {
				t.Fatalf("ReadFile(%s) = %q, want %q", tc.path, b, tc.wantBody)
			}
			if len(rec.decisions) != tc.decisions || len(rec.events) != tc.events {
				t.Fatalf("audited %d decisions and %d events, want %d and %d", len(rec.decisions), len(rec.events), tc.decisions, tc.events)
			}
			for _, req := range rec.decisions {
				if req.Caller.Instance != "inst-1" {
					t.Fatalf("decision attributed to %q", req.Caller.Instance)
				}
			}
			for _, ev := range rec.events {
				if ev.SandboxID != "inst-1" || ev.Caller != "tool-x" {
					t.Fatalf("event attributed to %q/%q", ev.Caller, ev.SandboxID)
				}
			}
		})
	}
}
