package callbacks

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/policy"
	"github.com/fluffy-waffle/fluffy/policy/token"
)

// logAuditor writes to a real audit log, as the kernel's auditor does.
type logAuditor struct{ l *audit.Log }

func (a logAuditor) Append(ctx context.Context, ev audit.Event) { _, _ = a.l.Append(ctx, ev) }
func (a logAuditor) RecordDecision(ctx context.Context, req policy.Request, res policy.Result, d time.Duration) {
	a.Append(ctx, router.DecisionEvent(req, res, d))
}
func (a logAuditor) RecordCapability(ctx context.Context, plugin, instance string, t token.Token) {
	a.Append(ctx, audit.Event{Type: audit.EventCapabilityIssued, Caller: plugin, CapabilityID: t.ID, SandboxID: instance})
}

// dirViews serves every plugin the same directory as its view.
type dirViews string

func (d dirViews) ViewRoot(string) (*confine.Root, error) { return confine.OpenRoot(string(d)) }

// TestServiceWithoutKernel: the service built from its dependencies alone
// judges reads by the policy, refuses undeclared capabilities, issues
// tokens bound to the instance, bounds progress lines and audits refusals.
func TestServiceWithoutKernel(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("visible\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".env"), []byte("API_KEY=secret\n"), 0o644)
	pol, err := policy.Default()
	if err != nil {
		t.Fatal(err)
	}
	eng := policy.NewEngine(pol, policy.Options{})
	defer eng.Close()
	log, err := audit.Open(ctx, audit.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var progress []string
	svc := New(Options{Policy: eng, Audit: logAuditor{log}, Views: dirViews(ws),
		Caller: func(spec supervisor.Spec, instance string) policy.Caller {
			return policy.Caller{Kind: "plugin", Plugin: spec.Name, PluginKind: string(spec.Kind), Instance: instance, Tags: spec.Tags}
		},
		Sandbox:  func(supervisor.Spec) string { return "" },
		Progress: func(s string) { progress = append(progress, s) }})
	declared := svc.For("fx-1", supervisor.Spec{Name: "fx", Kind: base.KindTool, Tags: []string{"third_party"}, Capabilities: []string{"fs.read"}}, nil)
	undeclared := svc.For("bare-1", supervisor.Spec{Name: "bare", Kind: base.KindTool, Tags: []string{"third_party"}}, nil)

	for _, c := range []struct {
		name, path  string
		undeclared  bool
		content     string
		readErr     string // a code the error contains, "" for none
		tokenErr    string
		deniedAudit bool
	}{
		{name: "allowed file", path: "a.txt", content: "visible\n"},
		{name: "secret refused", path: ".env", readErr: "POLICY_DENIED", tokenErr: "POLICY_DENIED", deniedAudit: true},
		{name: "undeclared capability", path: "a.txt", undeclared: true, readErr: CodeCapabilityUndeclared, tokenErr: CodeCapabilityUndeclared, deniedAudit: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := declared
			if c.undeclared {
				s = undeclared
			}
			b, sum, err := s.ReadFile(ctx, c.path, 0, base.TokenUse{})
			if c.readErr == "" && (err != nil || string(b) != c.content || sum == "") {
				t.Fatalf("read %s: %q %q %v", c.path, b, sum, err)
			}
			if c.readErr != "" && (err == nil || !strings.Contains(err.Error(), c.readErr) || len(b) != 0) {
				t.Fatalf("read %s: want %s, got %q %v", c.path, c.readErr, b, err)
			}
			capa, err := s.RequestCapability(ctx, "fs.read", c.path, 3, time.Minute)
			if c.tokenErr == "" && (err != nil || capa.TokenID == "") {
				t.Fatalf("capability for %s: %+v %v", c.path, capa, err)
			}
			if c.tokenErr != "" && (err == nil || !strings.Contains(err.Error(), c.tokenErr)) {
				t.Fatalf("capability for %s: want %s, got %+v %v", c.path, c.tokenErr, capa, err)
			}
			if err := log.Flush(); err != nil {
				t.Fatal(err)
			}
			recs, err := log.Recent(ctx, 20, audit.EventSyscall)
			if err != nil {
				t.Fatal(err)
			}
			denied := false
			for _, r := range recs {
				if r.Metadata["path"] == c.path && r.PolicyDecision == audit.DecisionDenied && r.Caller == s.(*callbacks).spec.Name {
					denied = true
				}
			}
			if denied != c.deniedAudit {
				t.Fatalf("denial of %s audited %v, want %v", c.path, denied, c.deniedAudit)
			}
			if c.tokenErr == "" {
				// The token reads the path it names, once per nonce.
				if b, _, err := s.ReadFile(ctx, c.path, 0, base.TokenUse{TokenID: capa.TokenID, Nonce: 1}); err != nil || string(b) != c.content {
					t.Fatalf("read with token: %q %v", b, err)
				}
				if _, _, err := s.ReadFile(ctx, c.path, 0, base.TokenUse{TokenID: capa.TokenID, Nonce: 1}); err == nil || !strings.Contains(err.Error(), CodeTokenInvalid) {
					t.Fatalf("a replayed nonce must be refused, got %v", err)
				}
			}
		})
	}

	if err := declared.ReportProgress(ctx, "called back\x1b[2J"+strings.Repeat("x", 1000), 0.5); err != nil {
		t.Fatal(err)
	}
	if len(progress) != 1 || !strings.HasPrefix(progress[0], "plugin fx says: called back") || strings.Contains(progress[0], "\x1b") || len(progress[0]) > 2*maxProgressLine {
		t.Fatalf("progress line not escaped and bounded: %q", progress)
	}
}
