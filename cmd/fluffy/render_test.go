package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func renderAll(color bool, evs ...agent.Event) string {
	var b bytes.Buffer
	r := newRenderer(&b, color, false)
	for _, ev := range evs {
		r.Event(ev)
	}
	r.Close()
	return b.String()
}

func TestRendererShowsWhatAPersonNeeds(t *testing.T) {
	out := renderAll(false,
		agent.Event{Type: agent.EventStateChanged, State: &agent.StateEvent{From: "idle", To: "planning", Mode: "strict"}},
		agent.Event{Type: agent.EventTextDelta, Text: "I'll write "},
		agent.Event{Type: agent.EventTextDelta, Text: "tests first."},
		agent.Event{Type: agent.EventToolExecuting, Tool: &agent.ToolEvent{CallID: "1", Name: "fs.read", Target: "config.go"}},
		agent.Event{Type: agent.EventToolResult, Tool: &agent.ToolEvent{CallID: "1", Name: "fs.read", Target: "config.go", OK: true, DurationMS: 3, Summary: "Read 40 lines"}},
		agent.Event{Type: agent.EventToolResult, Tool: &agent.ToolEvent{CallID: "2", Name: "test.run", OK: true, DurationMS: 1234, Summary: "1 failed (expected)", TestStatus: "red"}},
		agent.Event{Type: agent.EventToolResult, Tool: &agent.ToolEvent{CallID: "3", Name: "fs.write", Target: "main.go", DurationMS: 2, Error: uerr.New("TOOL_UNAVAILABLE", "fs.write main.go is not available in test_writing", "", "")}},
		agent.Event{Type: agent.EventDone, Done: &agent.DoneEvent{Status: agent.StatusDone, Summary: "Added error handling.", Files: []string{"config.go"}, Commit: "abc123"}},
	)
	for _, want := range []string{
		"[strict] idle → planning",
		"AI: I'll write tests first.\n",
		"✓ fs.read config.go (3ms)", "Read 40 lines",
		"✓ test.run (1.2s)", "1 failed (expected)",
		"✗ fs.write main.go (2ms)", "not available in test_writing",
		"Done. Added error handling.", "committed abc123",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Fatalf("escape sequences without colour:\n%q", out)
	}
}

func TestRendererEscapesUntrustedText(t *testing.T) {
	evil := "\x1b[2J\x1b]0;pwned\x07fake audit chain OK\r\x9b\u202eevil\xff"
	out := renderAll(true,
		agent.Event{Type: agent.EventTextDelta, Text: evil},
		agent.Event{Type: agent.EventToolResult, Tool: &agent.ToolEvent{Name: "x", Target: evil, Summary: evil}},
		agent.Event{Type: agent.EventNotice, Text: evil},
		agent.Event{Type: agent.EventReviewRequested, Review: &agent.ReviewEvent{Kind: "merge", Summary: evil, Files: []agent.ReviewFile{{Path: evil, Diff: "+" + evil}}}},
	)
	for _, bad := range []string{"\x1b[2J", "\x1b]0", "\x07", "\r", "\x9b", "\u202e", "\xff"} {
		if strings.Contains(out, bad) {
			t.Fatalf("untrusted control sequence %q reached the terminal:\n%q", bad, out)
		}
	}
	if !strings.Contains(out, `\x1b[2J`) {
		t.Fatalf("escaped form missing:\n%q", out)
	}
}

func TestRendererReviewDiffColoured(t *testing.T) {
	out := renderAll(true, agent.Event{Type: agent.EventReviewRequested, Review: &agent.ReviewEvent{
		Kind: "merge", Summary: "2 files, 12 lines",
		Files: []agent.ReviewFile{{Path: "config.go", Added: 1, Removed: 1, Diff: "--- a/config.go\n+++ b/config.go\n@@ -1 +1 @@\n-old\n+new\n"}},
	}})
	if !strings.Contains(out, "\x1b[32m+new") || !strings.Contains(out, "\x1b[31m-old") || !strings.Contains(out, "/approve FILE") {
		t.Fatalf("review rendering:\n%q", out)
	}
}

// A tool's error written by a plugin is shown as the plugin's.
func TestRendererMarksPluginErrors(t *testing.T) {
	out := renderAll(false,
		agent.Event{Type: agent.EventToolResult, Tool: &agent.ToolEvent{Name: "x", Error: uerr.FromPlugin("tool-x", "POLICY_DENIED", "access denied", "", "")}},
		agent.Event{Type: agent.EventToolResult, Tool: &agent.ToolEvent{Name: "y", Error: uerr.New("POLICY_DENIED", "kernel denied", "", "")}},
	)
	if !strings.Contains(out, "plugin tool-x says: access denied") || strings.Contains(out, "says: kernel denied") {
		t.Fatalf("%q", out)
	}
}

// A review offering "always" shows the rule that answer proposes, and the
// policy.update review shows the lines it writes and its trial.
func TestRendererShowsProposedPolicyRule(t *testing.T) {
	const item = `- {syscall: fs.write, path_glob: ["/docs/a.md"], plugin: tool-fs}`
	pc := &agent.PolicyChange{File: "/p/.fluffy/policy.yaml", Rules: "rule docs-review (line 11) gains the exception:\n  except:\n    " + item + "\n",
		Diff: "@@ +16 @@\n+    except:\n+      " + item + "\n"}
	cases := []struct {
		name string
		rv   agent.ReviewEvent
		want []string
	}{
		{"tool review offers always with its rule", agent.ReviewEvent{Kind: "tool", Summary: "fs.write docs/a.md", Scopes: []string{"once", "session", "always"}, Policy: pc},
			[]string{"/approve always proposes this change to /p/.fluffy/policy.yaml", "rule docs-review (line 11) gains the exception:", item, "/approve [once|session|always]"}},
		{"policy.update review shows the diff and the trial", agent.ReviewEvent{Kind: "policy.update", Summary: "policy update", Scopes: []string{"once"},
			Policy: &agent.PolicyChange{File: pc.File, Rules: pc.Rules, Diff: pc.Diff, Trial: &agent.PolicyTrial{Replayed: 7, Changes: []string{"fs.write path=docs/a.md: require_review -> allow (always-x)"}}}},
			[]string{"Proposed change to /p/.fluffy/policy.yaml", "+      " + item, "Trial: replayed 7 recent decisions: 1 change, 0 breaking", "require_review -> allow", "/approve to write it to /p/.fluffy/policy.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rv := tc.rv
			out := renderAll(false, agent.Event{Type: agent.EventReviewRequested, Review: &rv})
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in:\n%s", w, out)
				}
			}
		})
	}
}
