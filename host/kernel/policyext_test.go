package kernel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/policy"
)

// TestPolicyExtensionPlugins runs real policy-kind plugin processes as the
// engine's extension layer: a working one decides, and a crashing, hanging
// or lying one is a deny followed by a restart — never an allow.
func TestPolicyExtensionPlugins(t *testing.T) {
	dir := t.TempDir()
	built := filepath.Join(dir, "fixture")
	testbin.Into(t, "internal/fixtures/policy-misbehave", built)
	raw, _ := os.ReadFile(built)
	sup := supervisor.New(supervisor.Options{Workspace: t.TempDir(), OutRoot: t.TempDir(), StartTimeout: 5 * time.Second})
	defer sup.Close()
	for _, mode := range []string{"good", "crash", "hang", "bad"} {
		p := filepath.Join(dir, mode)
		os.WriteFile(p, raw, 0o755)
		sum, _ := manifests.FileSHA256(p)
		if err := sup.Add(supervisor.Spec{Name: "ext-" + mode, Version: "1.0.0", Kind: base.KindPolicy, Binary: p, SHA256: sum, APIVersions: []int{1, 2}}); err != nil {
			t.Fatal(err)
		}
	}
	allowAll, err := policy.Load("test.yaml", []byte("capabilities:\n  - name: allow-writes\n    match: {syscall: fs.write}\n    action: allow\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		mode    string
		path    string
		want    policy.Action
		reason  string
		restart bool
	}{
		{"good", "src/a.go", policy.Allow, "", false},
		{"good", "secret/key", policy.Deny, "secret/ is off limits", false},
		{"crash", "src/a.go", policy.Deny, "", true},
		{"hang", "src/a.go", policy.Deny, "", true},
		{"bad", "src/a.go", policy.Deny, "", false},
	} {
		t.Run(c.mode+"/"+c.path, func(t *testing.T) {
			ext := PolicyExtension{Plugins: sup, Plugin: "ext-" + c.mode}
			eng := policy.NewEngine(allowAll, policy.Options{Extensions: []policy.Extension{ext}})
			defer eng.Close()
			// Warm-up starts the plugin (the kernel does this at load), so the
			// 100 ms budget measures evaluation, not process start.
			_ = eng.Warm(ctx, 10*time.Second)
			before, _ := sup.Stats(ext.Plugin)
			res := eng.Evaluate(ctx, policy.Request{Syscall: "fs.write", Path: c.path, Caller: policy.Caller{Kind: "plugin", Plugin: "tool-fs"}})
			if res.Enforced != c.want {
				t.Fatalf("decision %s, want %s (reasons %v)", res.Enforced, c.want, res.Reasons)
			}
			if c.reason != "" && !strings.Contains(strings.Join(res.Reasons, ";"), c.reason) {
				t.Fatalf("reasons %v lack %q", res.Reasons, c.reason)
			}
			if c.restart {
				deadline := time.Now().Add(10 * time.Second)
				for {
					st, _ := sup.Stats(ext.Plugin)
					if st.Running && st.InstanceID != before.InstanceID {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("extension was not restarted: %+v", st)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
}
