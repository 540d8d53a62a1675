package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/store"
)

func auditTestEnv() (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, log: hclog.NewNullLogger(),
		getenv: func(string) string { return "" }}, &out, &errb
}

func seedProject(t *testing.T) string {
	t.Helper()
	project := t.TempDir()
	l, err := audit.Open(context.Background(), audit.Options{Dir: store.DefaultDir(project)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		ev := audit.Event{Type: audit.EventToolExecute, ToolName: "read_file", SessionID: "s1", Input: "read main.go"}
		if i%5 == 0 {
			ev = audit.Event{Type: audit.EventPolicyDecision, SyscallType: "fs.write", PolicyDecision: audit.DecisionDenied, DenyReason: "outside workspace", SessionID: "s2"}
		}
		if _, err := l.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return project
}

func TestAuditCLI(t *testing.T) {
	project := seedProject(t)
	cases := []struct {
		name string
		args []string
		code int
		want []string
		not  []string
	}{
		{"log", []string{"audit", "log", "--project", project}, 0, []string{"ID", "tool_execute", "outside workspace"}, nil},
		{"log by type", []string{"audit", "log", "--project", project, "--type", "policy_decision"}, 0, []string{"policy_decision"}, []string{"tool_execute"}},
		{"log by session json", []string{"audit", "log", "--project", project, "--session", "s2", "--json", "--limit", "2"}, 0, []string{`"id":16`, `"id":11`}, []string{`"id":6,`}},
		{"log bad since", []string{"audit", "log", "--project", project, "--since", "yesterdayish"}, 2, nil, nil},
		{"verify", []string{"audit", "verify", "--project", project, "--all"}, 0, []string{"checked 20 records", "chain OK"}, nil},
		{"stats", []string{"audit", "stats", "--project", project}, 0, []string{"records:  20", "policy_decision", "4"}, nil},
		{"no database", []string{"audit", "log", "--project", t.TempDir()}, 1, nil, nil},
		{"unknown verb", []string{"audit", "frobnicate"}, 2, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, out, errb := auditTestEnv()
			if code := run(c.args, e); code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, errb)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestAuditCLIExportAndVerifyFile(t *testing.T) {
	project := seedProject(t)
	file := filepath.Join(t.TempDir(), "export.jsonl")
	e, _, errb := auditTestEnv()
	if code := run([]string{"audit", "export", "--project", project, "-o", file}, e); code != 0 {
		t.Fatalf("export exit %d: %s", code, errb)
	}
	e, out, errb := auditTestEnv()
	if code := run([]string{"audit", "verify", "--file", file}, e); code != 0 || !strings.Contains(out.String(), "chain OK") {
		t.Fatalf("verify --file exit %d: %s %s", code, out, errb)
	}
	b, _ := os.ReadFile(file)
	os.WriteFile(file, bytes.Replace(b, []byte(`"outside workspace"`), []byte(`"inside workspace"`), 1), 0o600)
	e, out, errb = auditTestEnv()
	if code := run([]string{"audit", "verify", "--file", file}, e); code != 1 || !strings.Contains(errb.String(), "AUDIT_CHAIN_BREAK") || !strings.Contains(out.String(), "BREAK at 1") {
		t.Fatalf("tampered export: exit %d\n%s\n%s", code, out, errb)
	}
}

func TestAuditCLIVerifyReportsTamperedDatabase(t *testing.T) {
	project := seedProject(t)
	db, err := store.Open(context.Background(), store.Options{Dir: store.DefaultDir(project), NoRecover: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		return txn.Delete(append([]byte("a/r/"), 0, 0, 0, 0, 0, 0, 0, 7))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	e, out, errb := auditTestEnv()
	if code := run([]string{"audit", "verify", "--project", project}, e); code != 1 || !strings.Contains(out.String(), "BREAK at 7") || !strings.Contains(errb.String(), "AUDIT_CHAIN_BREAK") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
}

// Plugin-controlled fields (syscall strings, paths, reasons, callers) are
// escaped in `audit log`: no cleared screen, no forged "chain OK" row.
func TestAuditLogEscapesPluginText(t *testing.T) {
	project := t.TempDir()
	l, err := audit.Open(context.Background(), audit.Options{Dir: store.DefaultDir(project)})
	if err != nil {
		t.Fatal(err)
	}
	hostile := "\x1b[2J\x1b[H\nchain OK\x1b]0;pwned\x07\u202e\u009b2J"
	if _, err := l.Append(context.Background(), audit.Event{Type: audit.EventPolicyDecision, Caller: "plugin:x\x1b[1A",
		SyscallType: "fs.read" + hostile, PolicyDecision: audit.DecisionDenied, DenyReason: hostile}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	e, out, errb := auditTestEnv()
	if code := run([]string{"audit", "log", "--project", project}, e); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	s := out.String()
	if strings.ContainsAny(s, "\x1b\x07\u202e") || strings.Count(s, "\n") != 2 {
		t.Fatalf("raw control characters or forged lines in audit log:\n%q", s)
	}
	// --json too: encoding/json escapes C0 but passes C1 and bidi through.
	e, out, errb = auditTestEnv()
	if code := run([]string{"audit", "log", "--project", project, "--json"}, e); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if s := out.String(); strings.ContainsAny(s, "\x1b\u202e\u009b") || !strings.Contains(s, `\u202e`) {
		t.Fatalf("raw control characters in audit log --json:\n%q", s)
	}
}

type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time { return c.t }

// A retention removal is shown by `audit verify` as such, not as a bare
// "chain OK".
func TestAuditVerifyShowsRetention(t *testing.T) {
	project := t.TempDir()
	clk := &stepClock{t: time.Now().Add(-72 * time.Hour)}
	l, err := audit.Open(context.Background(), audit.Options{Dir: store.DefaultDir(project), Clock: clk,
		Retention: audit.Retention{MaxAge: 48 * time.Hour, MaxBytes: -1}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := l.Append(context.Background(), audit.Event{Type: audit.EventSyscall, SyscallType: "fs.read"}); err != nil {
			t.Fatal(err)
		}
	}
	clk.t = time.Now()
	if _, err := l.Append(context.Background(), audit.Event{Type: audit.EventSyscall, SyscallType: "fs.read"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ApplyRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"audit", "verify", "--project", project, "--all"}, {"audit", "verify", "--project", project}} {
		e, out, errb := auditTestEnv()
		if code := run(args, e); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb)
		}
		s := out.String()
		if !strings.Contains(s, "removed by retention") || !strings.Contains(s, "chain OK from record 6") {
			t.Fatalf("%v does not show the removal:\n%s", args, s)
		}
		if args[len(args)-1] == "--all" && !strings.Contains(s, "records 1..5 were removed by retention (age)") {
			t.Fatalf("--all does not name the removal:\n%s", s)
		}
	}
}
