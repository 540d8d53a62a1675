package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy/testpaths"
)

// TestPathClass: path_class classifies through the policy's own
// test_paths, so a project that names its tests differently moves the
// line for the policy exactly as for the workflow machine.
func TestPathClass(t *testing.T) {
	const rules = `
capabilities:
  - name: deny-source
    match: { syscall: fs.write, path_class: source }
    action: deny
  - name: allow-all
    match: { syscall: fs.write, path_glob: ["**"] }
    action: allow
`
	cases := []struct {
		name, testPaths, path string
		want                  Action
	}{
		{"default test", "", "a_test.go", Allow},
		{"default source", "", "a.go", Deny},
		{"default js test", "", "lib/__tests__/a.js", Allow},
		{"own group", "test_paths:\n  e2e: [\"/e2e/\"]\n", "e2e/login.go", Allow},
		{"own group keeps the defaults", "test_paths:\n  e2e: [\"/e2e/\"]\n", "a_test.go", Allow},
		{"removed group", "test_paths:\n  go: []\n", "a_test.go", Deny},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Load("p.yaml", []byte("version: 1\n"+c.testPaths+rules))
			if err != nil {
				t.Fatal(err)
			}
			got := NewEngine(p, Options{}).Evaluate(context.Background(), Request{Syscall: "fs.write", Path: c.path, Caller: Caller{Kind: "plugin", Plugin: "tool-fs"}})
			if got.Decision != c.want {
				t.Fatalf("%s: %v (%v), want %v", c.path, got.Decision, got.Reasons, c.want)
			}
			if p.Tests.IsTest(c.path) != (c.want == Allow) {
				t.Fatalf("Policy.Tests disagrees with path_class on %s", c.path)
			}
		})
	}
	bad := []struct{ name, src, code, want string }{
		{"unknown class", "capabilities:\n  - name: x\n    match: { syscall: fs.write, path_class: tests }\n    action: deny\n", CodeBadValue, "unknown path_class"},
		{"bad test_paths", "test_paths:\n  go: [\"[\"]\n", testpaths.CodeInvalid, "bad glob"},
		{"test_paths not a mapping", "test_paths: [\"*_test.go\"]\n", testpaths.CodeInvalid, "must be a mapping"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load("p.yaml", []byte("version: 1\n"+c.src))
			if !uerr.HasCode(err, c.code) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %s containing %q", err, c.code, c.want)
			}
		})
	}
	t.Run("an except on the same class never lets the rule fire", func(t *testing.T) {
		p, err := Load("p.yaml", []byte("version: 1\ncapabilities:\n  - name: x\n    match: { syscall: fs.write, path_class: test }\n    except:\n      - { path_class: [test, source] }\n    action: deny\n"))
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Warnings) == 0 || p.Warnings[0].Code != WarnNeverFires {
			t.Fatalf("warnings = %+v, want %s", p.Warnings, WarnNeverFires)
		}
	})
}
