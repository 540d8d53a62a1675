package manifests

import (
	"os"
	"slices"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestDynamicToolsCapability: a tool plugin may declare no tools only when
// it lists them at run time (tool.dynamic, the MCP bridge's capability).
func TestDynamicToolsCapability(t *testing.T) {
	const head = `name: tool-bridge
version: 0.1.0
kind: tool
description: "lists its tools at run time"
author: tests
entry: tool-bridge
sha256: "0000000000000000000000000000000000000000000000000000000000000000"
api_versions: [1, 2]
`
	cases := []struct {
		name, caps string
		code       string
	}{
		{"dynamic", "required_capabilities: [sandbox.toolchain, tool.dynamic]\n", ""},
		{"static without tools", "required_capabilities: [sandbox.toolchain]\n", CodeNoTools},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Parse("plugin.yaml", []byte(head+c.caps))
			if c.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(m.Tools) != 0 {
					t.Fatalf("tools %v", m.Tools)
				}
				return
			}
			if !uerr.HasCode(err, c.code) {
				t.Fatalf("want %s, got %v", c.code, err)
			}
		})
	}
	// fluffy's own bridge is such a plugin.
	data, err := os.ReadFile("../builtin-plugins/tool-mcp/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := Parse("plugin.yaml", data); err != nil || len(m.Tools) != 0 || !slices.Contains(m.RequiredCapabilities, CapDynamicTools) {
		t.Fatalf("tool-mcp's manifest: %v", err)
	}
}
