package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/policy/pin"
)

func testEnv(stdin string, tty bool) (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, log: hclog.NewNullLogger(),
		getenv: func(string) string { return "" }, isTTY: tty}, &out, &errb
}

// homeEnv is testEnv with $FLUFFY_HOME (where policy approvals are kept).
func homeEnv(home, stdin string, tty bool) (*env, *bytes.Buffer, *bytes.Buffer) {
	e, out, errb := testEnv(stdin, tty)
	e.home = home
	return e, out, errb
}

func TestPolicyExplainShowsWhy(t *testing.T) {
	e, out, errb := testEnv("", false)
	code := run([]string{"policy", "explain", "--project", t.TempDir(), "--syscall", "fs.write", "--path", "src/.env", "--sandbox", "code-executor"}, e)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	s := out.String()
	for _, want := range []string{"secrets-never-readable", "write-tests-and-source", "[yaml", "Decision: DENY", "reason: secrets are never readable"} {
		if !strings.Contains(s, want) {
			t.Errorf("explain output lacks %q:\n%s", want, s)
		}
	}
}

func TestPolicyValidateAndShow(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("capabilities:\n  - name: a\n    match: { syscall: fs.write }\n    action: allow\n    constraints: { max_file_size: 10mb }\n"), 0o644)
	e, _, errb := testEnv("", false)
	if code := run([]string{"policy", "validate", bad}, e); code != 1 || !strings.Contains(errb.String(), "POLICY_BAD_UNIT") || !strings.Contains(errb.String(), "bad.yaml:5") {
		t.Fatalf("exit %d: %s", code, errb)
	}
	e, out, _ := testEnv("", false)
	if code := run([]string{"policy", "show", "--project", dir}, e); code != 0 || !strings.Contains(out.String(), "builtin.policy-files") || !strings.Contains(out.String(), "embedded default") {
		t.Fatalf("show: %d %s", code, out)
	}
}

func TestPolicyUpdateNeedsReview(t *testing.T) {
	project := t.TempDir()
	target := filepath.Join(project, ".fluffy", "policy.yaml")
	os.MkdirAll(filepath.Dir(target), 0o755)
	current := "capabilities:\n  - name: read\n    match: { syscall: fs.read, path_glob: [\"**\"] }\n    action: allow\n    examples:\n"
	for i := 0; i < 7; i++ {
		current += "      - { syscall: fs.read, path: f" + string(rune('0'+i)) + ".go }\n"
	}
	os.WriteFile(target, []byte(current), 0o644)
	// The project's own policy applies once trusted (policy/pin).
	home := t.TempDir()
	if e, _, errb := homeEnv(home, "", false); run([]string{"policy", "trust", "--project", project, "--yes"}, e) != 0 {
		t.Fatalf("policy trust: %s", errb)
	}
	newPolicy := filepath.Join(project, "new.yaml")
	os.WriteFile(newPolicy, []byte("capabilities:\n  - { name: read, match: { syscall: fs.read, path_glob: [\"docs/**\"] }, action: allow }\n"), 0o644)

	e, out, errb := homeEnv(home, "", false)
	if code := run([]string{"policy", "update", "--project", project, newPolicy}, e); code != 1 || !strings.Contains(errb.String(), "POLICY_REVIEW_REQUIRED") {
		t.Fatalf("no TTY, no --yes: exit %d %s", code, errb)
	}
	if !strings.Contains(out.String(), "[BREAKING]") {
		t.Fatalf("trial run not shown:\n%s", out)
	}
	if got, _ := os.ReadFile(target); string(got) != current {
		t.Fatal("policy written without review")
	}
	// The current policy's examples replayed: 7 allows become denies.
	e, _, errb = homeEnv(home, "", false)
	if code := run([]string{"policy", "update", "--project", project, "--yes", newPolicy}, e); code != 1 || !strings.Contains(errb.String(), "POLICY_CONFIRM_PHRASE") {
		t.Fatalf("without phrase: exit %d %s", code, errb)
	}
	e, out, _ = homeEnv(home, "y\n", true)
	run([]string{"policy", "update", "--project", project, newPolicy}, e)
	i := strings.Index(out.String(), "Type \"")
	if i < 0 {
		t.Fatalf("no phrase prompt:\n%s", out)
	}
	phrase := strings.SplitN(out.String()[i+6:], "\"", 2)[0]
	e, out, errb = homeEnv(home, "", false)
	if code := run([]string{"policy", "update", "--project", project, "--yes", "--confirm", phrase, newPolicy}, e); code != 0 {
		t.Fatalf("exit %d %s", code, errb)
	}
	got, _ := os.ReadFile(target)
	want, _ := os.ReadFile(newPolicy)
	if !bytes.Equal(got, want) {
		t.Fatal("project policy not written")
	}
	e, out, _ = homeEnv(home, "", false)
	run([]string{"policy", "show", "--project", project}, e)
	if !strings.Contains(out.String(), target) || strings.Contains(out.String(), "Not in force") {
		t.Fatalf("show does not use the project policy (an update is trusted as it is written):\n%s", out)
	}
}

// TestPolicyShowsExtensionsAndNetworkWhitelist: what the kernel enforces
// from the policy file besides its rules is shown.
func TestPolicyShowsExtensionsAndNetworkWhitelist(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	target := filepath.Join(project, ".fluffy", "policy.yaml")
	os.MkdirAll(filepath.Dir(target), 0o755)
	text := []byte("version: 1\nextensions: [ext-good]\nnetwork_whitelist: [api.openai.com]\n")
	os.WriteFile(target, text, 0o644)
	if err := pin.NewStore(home).Approve(project, text, "test"); err != nil {
		t.Fatal(err)
	}
	e, out, _ := homeEnv(home, "", false)
	run([]string{"policy", "show", "--project", project}, e)
	for _, want := range []string{"Extensions (policy plugins consulted after the rules): ext-good", "Network whitelist (plugins reach only these, and only if their manifest declares them): api.openai.com:443"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("show lacks %q:\n%s", want, out)
		}
	}
}

// TestPolicyExplainSaysWhichFilesAreTests: explain names the path's class
// and the test path table the policy and the workflow gate share.
func TestPolicyExplainSaysWhichFilesAreTests(t *testing.T) {
	cases := []struct{ path, class, decision string }{
		{"csv.go", "csv.go is a source file", "Decision: DENY"},
		{"csv_test.go", "csv_test.go is a test file", "Decision: ALLOW"},
		{"lib/__tests__/parse.js", "lib/__tests__/parse.js is a test file", "Decision: ALLOW"},
		{"mypkg/core.py", "mypkg/core.py is a source file", "Decision: DENY"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			e, out, errb := testEnv("", false)
			code := run([]string{"policy", "explain", "--project", t.TempDir(), "--syscall", "fs.write", "--path", c.path, "--sandbox", "code-executor",
				"--caller", "tool-fs", "--mode", "strict", "--state", "test_writing"}, e)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			for _, want := range []string{c.class, c.decision, "Tests:   common: test/; go: *_test.go, testdata/; js: *.test.*, *.spec.*, __tests__/"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("explain output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}
