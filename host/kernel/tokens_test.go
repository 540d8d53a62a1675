package kernel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/callbacks"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy/token"
)

// fixtureKernel builds the fixture plugin, installs it with manifest and
// adds it to a kernel over ws (no sandbox: a plain process).
func fixtureKernel(t *testing.T, ws, manifest string, o Options) *Kernel {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fixture")
	testbin.Into(t, "internal/fixtures/tool-misbehave", bin)
	sum, _ := manifests.FileSHA256(bin)
	stamped, _ := manifests.StampSHA256([]byte(manifest), sum)
	if err := os.WriteFile(filepath.Join(dir, "plugin.yaml"), stamped, 0o644); err != nil {
		t.Fatal(err)
	}
	o.Home, o.Workspace, o.Sandbox = t.TempDir(), ws, SandboxNone
	k, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	if _, err := k.Registry.Install(context.Background(), dir, registry.InstallOptions{Yes: true}); err != nil {
		t.Fatal(err)
	}
	spec, _ := k.Registry.Runnable("fixture")
	if err := k.Plugins.Add(spec); err != nil {
		t.Fatal(err)
	}
	return k
}

type tokenRun struct {
	Token     string   `json:"token"`
	CapErr    string   `json:"capability_error"`
	ReadErr   string   `json:"read_error"`
	Content   string   `json:"content"`
	Reads     []string `json:"reads"`
	ExpiresMs int64    `json:"expires_ms"`
}

func callFixture(t *testing.T, k *Kernel, toolName string, args any) tokenRun {
	t.Helper()
	a, _ := json.Marshal(args)
	r, err := k.Plugins.CallTool(context.Background(), "fixture", tool.Call{ID: "t", Tool: toolName, Args: a}, nil)
	if err != nil || !r.OK {
		t.Fatalf("%v %+v", err, r)
	}
	var out tokenRun
	if err := json.Unmarshal(r.Output, &out); err != nil {
		t.Fatalf("%v: %s", err, r.Output)
	}
	return out
}

func prefixes(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i], _, _ = strings.Cut(s, ":")
	}
	return out
}

// Capability tokens were issued (with any lifetime and
// operation count) but no callback accepted one, the peer binding was never
// set and nothing swept them. Through a real plugin process and the real
// broker: a token reads exactly its path, once per fresh nonce, maxOps
// times, only for the instance and peer it was issued to; over-long or
// over-large tokens are refused; expired ones are swept and audited.
func TestCapabilityTokensThroughTheCallback(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("A"), 0o644)
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("B"), 0o644)
	os.WriteFile(filepath.Join(ws, ".env"), []byte("SECRET"), 0o644)
	k := fixtureKernel(t, ws, fixtureManifest, Options{TokenSweepInterval: 50 * time.Millisecond})
	ctx := context.Background()

	// Two operations, nonces strictly increasing.
	r := callFixture(t, k, "fx.token", map[string]any{"path": "a.txt", "max_ops": 2, "nonces": []uint64{1, 1, 2, 3}})
	if r.Token == "" || r.CapErr != "" {
		t.Fatalf("token for a.txt: %+v", r)
	}
	want := []string{"ok", callbacks.CodeTokenInvalid, "ok", callbacks.CodeTokenInvalid}
	if got := prefixes(r.Reads); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("reads %q, want %v", r.Reads, want)
	}
	if r.Reads[0] != "ok:A" || !strings.Contains(r.Reads[1], "replay") || !strings.Contains(r.Reads[3], "no operations left") {
		t.Fatalf("reads %q", r.Reads)
	}
	// The token covers its path only, and a link does not widen it.
	if r := callFixture(t, k, "fx.token", map[string]any{"path": "a.txt", "read_path": "b.txt", "max_ops": 3, "nonces": []uint64{1}}); len(r.Reads) != 1 || !strings.Contains(r.Reads[0], "does not cover") {
		t.Fatalf("a.txt's token read b.txt: %+v", r)
	}
	// No token for what the policy denies; none for the unbounded.
	if r := callFixture(t, k, "fx.token", map[string]any{"path": ".env", "nonces": []uint64{1}}); !strings.Contains(r.CapErr, "POLICY_DENIED") || r.Token != "" {
		t.Fatalf("token for .env: %+v", r)
	}
	for _, ask := range []map[string]any{
		{"path": "a.txt", "max_ops": 1 << 31}, // 2^31, as before
		{"path": "a.txt", "max_ops": token.MaxOps + 1},
		{"path": "a.txt", "max_ops": 1, "ttl_ms": int64(10 * 365 * 24 * time.Hour / time.Millisecond)},
	} {
		if r := callFixture(t, k, "fx.token", ask); !strings.Contains(r.CapErr, "POLICY_TOKEN_LIMIT") {
			t.Fatalf("%v: %+v", ask, r)
		}
	}
	// A made-up token is refused, not treated as "no token".
	if r := callFixture(t, k, "fx.token", map[string]any{"token": "cap_forged", "path": "a.txt", "nonces": []uint64{1}}); !strings.HasPrefix(r.Reads[0], callbacks.CodeTokenInvalid) || !strings.Contains(r.Reads[0], "unknown token") {
		t.Fatalf("forged token: %+v", r)
	}

	// Peer binding: the kernel set it from the process it launched. A
	// token for this instance but another peer is refused.
	issued, _ := k.Audit.Recent(ctx, 1, audit.EventCapabilityIssued)
	if len(issued) != 1 || issued[0].SandboxID == "" {
		t.Fatalf("capability_issued: %+v", issued)
	}
	instance := issued[0].SandboxID
	foreign, err := k.Policy.Tokens().Issue(token.Binding{Instance: instance, PID: 1, ContainerID: "someone-else"},
		token.Scope{Syscall: "fs.read", Paths: []string{"/a.txt"}, MaxOps: 5}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r := callFixture(t, k, "fx.token", map[string]any{"token": foreign.ID, "path": "a.txt", "nonces": []uint64{1}}); !strings.Contains(r.Reads[0], "bound to another") {
		t.Fatalf("a token bound to another peer was accepted: %+v", r)
	}
	mine, err := k.Policy.Tokens().Issue(token.Binding{Instance: instance + "x", PID: 1},
		token.Scope{Syscall: "fs.read", Paths: []string{"/a.txt"}, MaxOps: 5}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r := callFixture(t, k, "fx.token", map[string]any{"token": mine.ID, "path": "a.txt", "nonces": []uint64{1}}); !strings.Contains(r.Reads[0], "bound to another") {
		t.Fatalf("another instance's token was accepted: %+v", r)
	}

	// Refusals are audited with the token id.
	k.Audit.Flush()
	recs, _ := k.Audit.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventSyscall}})
	var byToken, refused int
	for _, rec := range recs {
		switch {
		case rec.PolicyDecision == audit.DecisionAllowedByToken:
			byToken++
		case rec.PolicyDecision == audit.DecisionDenied && rec.CapabilityID != "":
			refused++
		}
	}
	if byToken != 2 || refused < 5 {
		t.Fatalf("audit: %d reads allowed by token (want 2), %d token refusals (want ≥5)", byToken, refused)
	}

	// A short token expires and the running kernel sweeps it.
	r = callFixture(t, k, "fx.token", map[string]any{"path": "b.txt", "max_ops": 5, "ttl_ms": 100})
	if r.Token == "" {
		t.Fatalf("short token: %+v", r)
	}
	waitFor(t, func() bool {
		ends, _ := k.Audit.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventCapabilityExpired}})
		for _, e := range ends {
			if e.CapabilityID == r.Token {
				return true
			}
		}
		return false
	}, "the expired token to be swept and audited")
	if got := callFixture(t, k, "fx.token", map[string]any{"token": r.Token, "path": "b.txt", "nonces": []uint64{1}}); !strings.Contains(got.Reads[0], "unknown token") {
		t.Fatalf("swept token: %+v", got)
	}

	// A stopped instance's tokens go with it.
	r = callFixture(t, k, "fx.token", map[string]any{"path": "a.txt", "max_ops": 5})
	if err := k.Plugins.Restart(ctx, "fixture"); err != nil {
		t.Fatal(err)
	}
	if got := callFixture(t, k, "fx.token", map[string]any{"token": r.Token, "path": "a.txt", "nonces": []uint64{1}}); !strings.HasPrefix(got.Reads[0], callbacks.CodeTokenInvalid) {
		t.Fatalf("a token of the stopped instance still reads: %+v", got)
	}
}

// Issuance is rate limited per instance: a plugin cannot mint tokens in a
// loop (2 000 in 3.9 s before).
func TestCapabilityIssuanceIsRateLimited(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("A"), 0o644)
	k := fixtureKernel(t, ws, fixtureManifest, Options{})
	var limited, issued int
	for i := 0; i < callbacks.CapabilityBurst+10; i++ {
		r := callFixture(t, k, "fx.token", map[string]any{"path": "a.txt", "max_ops": 1})
		switch {
		case r.Token != "":
			issued++
		case strings.Contains(r.CapErr, callbacks.CodeRateLimited):
			limited++
		default:
			t.Fatalf("request %d: %+v", i, r)
		}
	}
	if limited == 0 || issued > callbacks.CapabilityBurst+callbacks.CapabilityRate*5 {
		t.Fatalf("%d issued, %d rate limited", issued, limited)
	}
	t.Logf("%d capability tokens issued, %d requests rate limited", issued, limited)
}

// required_capabilities was shown at install and never
// enforced. A kernel callback for a syscall the manifest does not declare
// is refused with a structured error and audited, whatever the policy says.
func TestUndeclaredCapabilityIsRefused(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("A"), 0o644)
	undeclared := strings.Replace(fixtureManifest, "required_capabilities: [fs.read]\n", "", 1)
	if undeclared == fixtureManifest {
		t.Fatal("fixture manifest changed shape")
	}
	k := fixtureKernel(t, ws, undeclared, Options{})
	r := callFixture(t, k, "fx.kernel", map[string]any{"path": "a.txt"})
	if r.Content != "" || !strings.Contains(r.ReadErr, callbacks.CodeCapabilityUndeclared) || !strings.Contains(r.CapErr, callbacks.CodeCapabilityUndeclared) || r.Token != "" {
		t.Fatalf("undeclared fs.read: %+v", r)
	}
	ctx := context.Background()
	k.Audit.Flush()
	recs, _ := k.Audit.Query(ctx, audit.Filter{Types: []audit.EventType{audit.EventSyscall}})
	var refused int
	for _, rec := range recs {
		if rec.SyscallType == "fs.read" && rec.PolicyDecision == audit.DecisionDenied && strings.Contains(rec.DenyReason, "required_capabilities") {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("want the read and the capability request audited as refused, got %d: %+v", refused, recs)
	}
}
