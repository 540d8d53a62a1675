package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/policy"
)

func TestParseFlagsAnywhere(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		yes     bool
		project string
		tags    string
		pos     []string
		err     string
	}{
		{name: "flags before", args: []string{"--yes", "--project", "p", "FILE"}, yes: true, project: "p", pos: []string{"FILE"}},
		{name: "flags after", args: []string{"FILE", "--yes", "--project", "p"}, yes: true, project: "p", pos: []string{"FILE"}},
		{name: "flags between", args: []string{"A", "--project=p", "B", "-yes"}, yes: true, project: "p", pos: []string{"A", "B"}},
		{name: "value that looks like a flag", args: []string{"--project", "--yes", "A"}, project: "--yes", pos: []string{"A"}},
		{name: "repeatable", args: []string{"--tag", "a", "X", "--tag", "b"}, tags: "a,b", pos: []string{"X"}},
		{name: "double dash ends flags", args: []string{"--yes", "--", "--project", "-x"}, yes: true, pos: []string{"--project", "-x"}},
		{name: "double dash after positional", args: []string{"A", "--", "--yes"}, pos: []string{"A", "--yes"}},
		{name: "lone dash is positional", args: []string{"-", "--yes"}, yes: true, pos: []string{"-"}},
		{name: "bool with value", args: []string{"A", "--yes=false"}, pos: []string{"A"}},
		{name: "unknown flag after positional", args: []string{"A", "--nope"}, err: "flag provided but not defined: -nope"},
		{name: "missing value", args: []string{"A", "--project"}, err: "flag needs an argument: -project"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFlags("test")
			yes := fs.Bool("yes", false, "")
			project := fs.String("project", ".", "")
			var tags stringList
			fs.Var(&tags, "tag", "")
			err := parseFlags(fs, tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.project
			if want == "" {
				want = "."
			}
			if *yes != tc.yes || *project != want || tags.String() != tc.tags || !slices.Equal(fs.Args(), tc.pos) {
				t.Fatalf("yes=%v project=%q tags=%q pos=%q; want %v %q %q %q", *yes, *project, tags.String(), fs.Args(), tc.yes, want, tc.tags, tc.pos)
			}
		})
	}
}

// `fluffy policy update FILE --yes --project DIR`, the order --help
// prints, writes the policy (flags after the positional used to be refused
// with "expected exactly one FILE").
func TestPolicyUpdateFlagsAfterFile(t *testing.T) {
	project, home := t.TempDir(), t.TempDir()
	newPolicy := filepath.Join(t.TempDir(), "new.yaml")
	// The default policy itself: no breaking change, so no phrase needed.
	content := string(policy.DefaultYAML())
	if err := os.WriteFile(newPolicy, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	e, _, errb := homeEnv(home, "", false)
	if code := run([]string{"policy", "update", newPolicy, "--yes", "--project", project}, e); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if got, _ := os.ReadFile(filepath.Join(project, ".fluffy", "policy.yaml")); string(got) != content {
		t.Fatalf("policy not written: %q", got)
	}
}

// A command without flags takes `--` and refuses a flag as a usage error.
func TestFlaglessCommandParsesFlags(t *testing.T) {
	c := newCLI(t)
	cases := []struct {
		args   []string
		usage  bool
		stderr string
	}{
		{args: []string{"plugin", "enable", "--", "no-such-plugin"}, stderr: "no-such-plugin"},
		{args: []string{"plugin", "enable", "no-such-plugin", "--bogus"}, usage: true, stderr: "USAGE"},
		{args: []string{"plugin", "grant", "x", "--", "trusted_write"}, stderr: "x"},
	}
	for _, tc := range cases {
		_, stderr, code := c.run(tc.args...)
		if (code == 2) != tc.usage || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%q: exit %d, stderr %s", tc.args, code, stderr)
		}
	}
}

// A usage error quotes the argument it refuses bounded and escaped.
func TestUsageErrorQuotesBounded(t *testing.T) {
	long := strings.Repeat("x", 5000)
	for _, args := range [][]string{
		{"plugin", "enable", "NAME", "--" + long},
		{"policy", "show", "--\x1b[2J" + long},
		{"plugin", long},
	} {
		_, stderr, code := newCLI(t).run(args...)
		if code != 2 || len(stderr) > 1500 || strings.Contains(stderr, "\x1b") {
			t.Errorf("%.40q: exit %d, %d bytes of stderr: %.200q", args, code, len(stderr), stderr)
		}
	}
}
