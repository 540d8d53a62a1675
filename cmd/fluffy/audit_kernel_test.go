package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/test/harness"
)

// While the project's kernel runs it holds the audit database: every audit
// verb is answered by the kernel, with the records it wrote, instead of
// failing on the database's lock.
func TestAuditVerbsWhileTheKernelRuns(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("needs git")
	}
	fluffy := fluffyLayout(t, "provider-replay")
	home := shortHome(t)
	ws := demoProject(t, fluffy, home, "../../examples/cassettes/parseconfig.jsonl")
	env := append(os.Environ(), "FLUFFY_HOME="+home, "FLUFFY_L1=none", "FLUFFY_SANDBOX=none")
	run := harness.User{T: t, Fluffy: fluffy, Dir: ws, Env: env}.Run
	t.Cleanup(func() { run("kernel", "stop") })
	// Any command that needs the kernel starts it (the bootstrap).
	if out, errs, code := run("session", "list", "--json"); code != 0 {
		t.Fatalf("session list: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := run("kernel", "status"); code != 0 {
		t.Fatalf("the kernel does not run: exit %d\n%s%s", code, out, errs)
	}
	exported := filepath.Join(t.TempDir(), "audit.jsonl")
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, out string)
	}{
		{"log", []string{"audit", "log", "--json", "--limit", "0"}, func(t *testing.T, out string) {
			n := 0
			for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); n++ {
				var r struct {
					ID        uint64 `json:"id"`
					EventType string `json:"event_type"`
				}
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.ID == 0 || r.EventType == "" {
					t.Fatalf("record %q: %v", sc.Text(), err)
				}
			}
			if n == 0 {
				t.Fatal("no records")
			}
		}},
		{"log table", []string{"audit", "log"}, func(t *testing.T, out string) {
			if !strings.HasPrefix(out, "ID") || strings.Count(out, "\n") < 2 {
				t.Fatalf("table:\n%s", out)
			}
		}},
		{"verify", []string{"audit", "verify", "--all"}, func(t *testing.T, out string) {
			if !strings.Contains(out, "chain OK") {
				t.Fatalf("verify:\n%s", out)
			}
		}},
		{"stats", []string{"audit", "stats", "--json"}, func(t *testing.T, out string) {
			var s struct {
				Records uint64 `json:"records"`
			}
			if err := json.Unmarshal([]byte(out), &s); err != nil || s.Records == 0 {
				t.Fatalf("stats %q: %v", out, err)
			}
		}},
		{"export", []string{"audit", "export", "-o", exported}, func(t *testing.T, _ string) {
			out, errs, code := run("audit", "verify", "--all", "--file", exported)
			if code != 0 || !strings.Contains(out, "chain OK") {
				t.Fatalf("the export does not verify: exit %d\n%s%s", code, out, errs)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := run(c.args...)
			if code != 0 {
				t.Fatalf("fluffy %v: exit %d\n%s%s", c.args, code, out, errs)
			}
			c.check(t, out)
		})
	}
}
