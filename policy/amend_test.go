package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func toolCaller(plugin string, tags ...string) Caller {
	return Caller{Kind: "plugin", Plugin: plugin, PluginKind: "tool", Tags: tags}
}

// linesKept reports whether every line of old appears in new, in order
// (an amendment only inserts).
func linesKept(old, new string) bool {
	nl := strings.Split(new, "\n")
	i := 0
	for _, l := range strings.Split(old, "\n") {
		for i < len(nl) && nl[i] != l {
			i++
		}
		if i == len(nl) {
			return false
		}
		i++
	}
	return true
}

func TestAmendDefaultPolicy(t *testing.T) {
	def, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	// A policy that allows writes under src/ only, so a reviewed README.md
	// has no allow to fall back on.
	const srcOnly = `version: 1
capabilities:
  - name: write-src
    match: { syscall: fs.write, path_glob: ["src/**"] }
    action: allow
    constraints: { require_sandbox: L2 }
  - name: docs-and-config-review
    match: { syscall: fs.write, path_glob: ["*.md"] }
    action: require_review
`
	cases := []struct {
		name     string
		policy   string // "" is the default policy
		req      Request
		rules    []string
		anyArgs  bool
		newRule  bool
		wantText []string
		// still reviewed after the amendment
		stillReviewed []Request
	}{
		{
			name:     "docs review under the default's allow only gains an except",
			req:      Request{Syscall: "fs.write", Path: "README.md", Caller: toolCaller("tool-fs"), Sandbox: "code-executor"},
			rules:    []string{"docs-and-config-review"},
			wantText: []string{`- {syscall: fs.write, path_glob: ["/README.md"], plugin: tool-fs}`},
			stillReviewed: []Request{
				{Syscall: "fs.write", Path: "docs/README.md", Caller: toolCaller("tool-fs"), Sandbox: "code-executor"},
				{Syscall: "fs.write", Path: "README.md", Caller: toolCaller("tool-other"), Sandbox: "code-executor"},
			},
		},
		{
			name:     "docs review without an allow gains an except and an allow rule",
			policy:   srcOnly,
			req:      Request{Syscall: "fs.write", Path: "README.md", Caller: toolCaller("tool-fs"), Sandbox: "code-executor"},
			rules:    []string{"docs-and-config-review"},
			newRule:  true,
			wantText: []string{`- {syscall: fs.write, path_glob: ["/README.md"], plugin: tool-fs}`, "name: always-fs-write-readme-md", "action: allow", "require_sandbox: L2"},
			stillReviewed: []Request{
				{Syscall: "fs.write", Path: "docs/README.md", Caller: toolCaller("tool-fs"), Sandbox: "code-executor"},
				{Syscall: "fs.write", Path: "README.md", Caller: toolCaller("tool-other"), Sandbox: "code-executor"},
			},
		},
		{
			name:     "third-party review under an allow only gains an except",
			req:      Request{Syscall: "fs.write", Path: "src/a*b.go", Caller: toolCaller("tool-x", "third_party"), Sandbox: "code-executor"},
			rules:    []string{"third-party-no-writes"},
			wantText: []string{`- {syscall: fs.write, path_glob: ["/src/a\\*b.go"], plugin: tool-x}`},
			stillReviewed: []Request{
				{Syscall: "fs.write", Path: "src/axb.go", Caller: toolCaller("tool-x", "third_party"), Sandbox: "code-executor"},
				{Syscall: "fs.delete", Path: "src/a*b.go", Caller: toolCaller("tool-x", "third_party"), Sandbox: "code-executor"},
			},
		},
		{
			name:     "an MCP tool is named by its syscall and caller alone",
			req:      Request{Syscall: "mcp.docs.search", Caller: toolCaller("mcp-docs", "third_party", "mcp_server"), Sandbox: "code-executor"},
			rules:    []string{"mcp-tools-review"},
			anyArgs:  true,
			newRule:  true,
			wantText: []string{`- {syscall: mcp.docs.search, plugin: mcp-docs}`, "name: always-mcp-docs-search", "mcp.docs.search (any arguments) by mcp-docs"},
			stillReviewed: []Request{
				{Syscall: "mcp.docs.fetch", Caller: toolCaller("mcp-docs", "third_party", "mcp_server"), Sandbox: "code-executor"},
				{Syscall: "mcp.docs.search", Caller: toolCaller("mcp-other", "third_party", "mcp_server"), Sandbox: "code-executor"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			def := def
			if tc.policy != "" {
				if def, err = Load("policy.yaml", []byte(tc.policy)); err != nil {
					t.Fatal(err)
				}
			}
			if res := NewEngine(def, Options{}).Evaluate(context.Background(), tc.req); res.Decision != RequireReview {
				t.Fatalf("precondition: %s is %s, want require_review", tc.req, res.Decision)
			}
			am, err := Amend(def, []Exemption{{Request: tc.req, Rules: tc.rules, AnyArguments: tc.anyArgs}})
			if err != nil {
				t.Fatalf("Amend: %s", uerr.From(err).Render())
			}
			got := string(am.Content)
			if !linesKept(string(def.Content), got) {
				t.Fatalf("the amendment dropped or changed lines of the file:\n%s", am.Diff)
			}
			shown := am.String() + am.Diff
			for _, w := range tc.wantText {
				if !strings.Contains(shown, w) {
					t.Errorf("proposal does not show %q:\n%s", w, shown)
				}
			}
			hasNew := false
			for _, it := range am.Items {
				hasNew = hasNew || it.NewRule
			}
			if hasNew != tc.newRule {
				t.Errorf("new rule added = %v, want %v", hasNew, tc.newRule)
			}
			np, err := Load("policy.yaml", am.Content)
			if err != nil {
				t.Fatalf("amended policy does not load: %v", err)
			}
			eng := NewEngine(np, Options{})
			if res := eng.Evaluate(context.Background(), tc.req); res.Decision != Allow {
				t.Errorf("the approved request is %s after the amendment, want allow (%v)", res.Decision, res.Reasons)
			}
			for _, r := range tc.stillReviewed {
				if res := eng.Evaluate(context.Background(), r); res.Decision != RequireReview {
					t.Errorf("%s is %s after the amendment, want require_review", r, res.Decision)
				}
			}
		})
	}
}

func TestAmendRefuses(t *testing.T) {
	def, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	flow := mustLoad(t, "version: 1\ncapabilities:\n  - { name: r, match: { syscall: fs.write }, action: require_review }\n")
	cases := []struct {
		name string
		p    *Policy
		ex   Exemption
	}{
		{"no path", def, Exemption{Request: Request{Syscall: "shell.exec", Caller: toolCaller("tool-shell"), SessionMode: "debug"}, Rules: []string{"shell-debug-review"}}},
		{"a pattern for a syscall", def, Exemption{Request: Request{Syscall: "mcp.*", Caller: toolCaller("mcp-docs")}, Rules: []string{"mcp-tools-review"}, AnyArguments: true}},
		{"a path-less request of a tool that is not one server's tool", def, Exemption{Request: Request{Syscall: "mcp.docs.search", Caller: toolCaller("mcp-docs")}, Rules: []string{"mcp-tools-review"}}},
		{"project root", def, Exemption{Request: Request{Syscall: "fs.write", Path: ".", Caller: toolCaller("tool-fs")}, Rules: []string{"docs-and-config-review"}}},
		{"not a review rule", def, Exemption{Request: Request{Syscall: "fs.write", Path: "a.md", Caller: toolCaller("tool-fs")}, Rules: []string{"read-project"}}},
		{"flow-style rule", flow, Exemption{Request: Request{Syscall: "fs.write", Path: "a.md", Caller: toolCaller("tool-fs")}, Rules: []string{"r"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Amend(tc.p, []Exemption{tc.ex})
			if ue, ok := uerr.As(err); !ok || ue.Code != CodeAmend {
				t.Fatalf("Amend = %v, want a %s error", err, CodeAmend)
			}
		})
	}
}
