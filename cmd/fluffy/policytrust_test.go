package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/policy"
)

// A cloned repository's .fluffy/policy.yaml (here `mode: observe` with an
// allow-everything rule) is not the policy in force until the person
// trusts it; trusting makes it apply; a hand edit un-trusts it; a
// `policy update` keeps it trusted.
func TestPolicyTrustGatesAClonedPolicy(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	target := policy.ProjectPath(project)
	os.MkdirAll(filepath.Dir(target), 0o755)
	cloned := "mode: observe\ncapabilities:\n  - { name: everything, match: { syscall: \"*\" }, action: allow }\n"
	if err := os.WriteFile(target, []byte(cloned), 0o644); err != nil {
		t.Fatal(err)
	}
	explain := func() string {
		t.Helper()
		e, out, errb := homeEnv(home, "", false)
		if code := run([]string{"policy", "explain", "--project", project, "--syscall", "fs.write", "--path", "src/.env", "--sandbox", "code-executor"}, e); code != 0 {
			t.Fatalf("explain: exit %d %s", code, errb)
		}
		return out.String()
	}
	s := explain()
	for _, want := range []string{policy.DefaultName, "is not trusted yet", "fluffy policy trust", "Decision: DENY"} {
		if !strings.Contains(s, want) {
			t.Fatalf("an untrusted cloned policy: explain lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "observe") {
		t.Fatalf("the cloned observe policy is in force before it was trusted:\n%s", s)
	}

	// No terminal, no --yes: refused, and nothing changes.
	e, out, errb := homeEnv(home, "", false)
	if code := run([]string{"policy", "trust", "--project", project}, e); code != 1 || !strings.Contains(errb.String(), CodeTrustReviewRequired) {
		t.Fatalf("no TTY, no --yes: exit %d %s", code, errb)
	}
	for _, want := range []string{"WARNING: mode: observe", "Changes against the embedded default policy", "+ mode: observe"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("trust does not show %q:\n%s", want, out)
		}
	}
	// A "no" on the terminal leaves it untrusted.
	e, _, errb = homeEnv(home, "n\n", true)
	if code := run([]string{"policy", "trust", "--project", project}, e); code != 1 || !strings.Contains(errb.String(), CodeTrustRejected) {
		t.Fatalf("answered no: exit %d %s", code, errb)
	}
	if s := explain(); !strings.Contains(s, "is not trusted yet") {
		t.Fatalf("refused trust applied the file:\n%s", s)
	}

	// Trusted on the terminal: the file applies (observe mode: the deny is
	// only logged).
	e, out, errb = homeEnv(home, "y\n", true)
	if code := run([]string{"policy", "trust", "--project", project}, e); code != 0 {
		t.Fatalf("trust: exit %d %s", code, errb)
	}
	if !strings.Contains(out.String(), "Trusted: "+target) {
		t.Fatalf("trust output:\n%s", out)
	}
	s = explain()
	if !strings.Contains(s, target+" (mode observe)") || strings.Contains(s, "not trusted") {
		t.Fatalf("the trusted file is not in force:\n%s", s)
	}
	if fi, err := os.Stat(filepath.Join(home, "trust", "policies")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("trust store directory: %v %v", fi, err)
	}
	recs, _ := filepath.Glob(filepath.Join(home, "trust", "policies", "*.json"))
	if len(recs) != 1 {
		t.Fatalf("records: %v", recs)
	}
	if fi, err := os.Stat(recs[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record mode: %v %v", fi, err)
	}

	// Edited by hand: un-trusted, the default applies, and trust shows
	// the change against the version trusted last.
	edited := cloned + "  - { name: more, match: { syscall: net.fetch }, action: allow }\n"
	if err := os.WriteFile(target, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := explain(); !strings.Contains(s, "changed since you trusted it") || !strings.Contains(s, policy.DefaultName) {
		t.Fatalf("a hand edit kept the file in force:\n%s", s)
	}
	e, out, _ = homeEnv(home, "", false)
	run([]string{"policy", "trust", "--project", project}, e)
	if !strings.Contains(out.String(), "Changes against the version you trusted last") || !strings.Contains(out.String(), "+   - { name: more") || strings.Contains(out.String(), "+ mode: observe") {
		t.Fatalf("trust does not diff against the last trusted version:\n%s", out)
	}

	// policy update writes a reviewed file: it stays trusted.
	next := filepath.Join(t.TempDir(), "next.yaml")
	os.WriteFile(next, append(policy.DefaultYAML(), "\n  - name: fixture-tools\n    match: { syscall: \"fx.*\", plugin: fixture }\n    action: allow\n"...), 0o644)
	e, _, errb = homeEnv(home, "", false)
	if code := run([]string{"policy", "update", "--project", project, "--yes", next}, e); code != 0 {
		t.Fatalf("update: exit %d %s", code, errb)
	}
	e, out, _ = homeEnv(home, "", false)
	run([]string{"policy", "show", "--project", project}, e)
	if !strings.Contains(out.String(), "Policy: "+target) || strings.Contains(out.String(), "Not in force") {
		t.Fatalf("an updated policy is not in force:\n%s", out)
	}
	e, out, _ = homeEnv(home, "", false)
	if code := run([]string{"policy", "trust", "--project", project}, e); code != 0 || !strings.Contains(out.String(), "Already trusted") {
		t.Fatalf("after update: exit %d\n%s", code, out)
	}
}

// A project without a policy file has nothing to trust.
func TestPolicyTrustWithoutFile(t *testing.T) {
	e, _, errb := homeEnv(t.TempDir(), "", false)
	if code := run([]string{"policy", "trust", "--project", t.TempDir(), "--yes"}, e); code != 1 || !strings.Contains(errb.String(), CodeTrustNoFile) {
		t.Fatalf("exit %d %s", code, errb)
	}
}
