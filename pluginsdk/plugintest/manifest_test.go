package plugintest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

// TestManifestProblems: one schema, checked — a Go schema that drifted from
// plugin.yaml is reported, an identical one (other key order) is not.
func TestManifestProblems(t *testing.T) {
	yaml := `name: demo
version: 1.0.0
kind: tool
description: "demo"
author: "me"
entry: demo
sha256: ""
api_versions: [1, 2]
sandbox: {template: code-executor}
tools:
  - name: demo.x
    summary: "do x"
    parameters:
      type: object
      properties: {path: {type: string}}
      required: [path]
    output_mode: full
`
	p := filepath.Join(t.TempDir(), "plugin.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	set := func(params string) *pluginsdk.ToolSet {
		return &pluginsdk.ToolSet{Name: "demo", Version: "1.0.0", Specs: []pluginsdk.ToolSpec{{
			Def:     tool.Def{Name: "demo.x", Summary: "do x", Parameters: json.RawMessage(params), OutputMode: tool.OutputFull},
			Handler: func(context.Context, *pluginsdk.ToolContext, json.RawMessage) (any, error) { return nil, nil },
		}}}
	}
	if pr := ManifestProblems(set(`{"required":["path"],"type":"object","properties":{"path":{"type":"string"}}}`), p); len(pr) != 0 {
		t.Fatalf("identical schemas reported: %v", pr)
	}
	pr := ManifestProblems(set(`{"type":"object","properties":{"path":{"type":"integer"}},"required":["path"]}`), p)
	if len(pr) != 1 || !strings.Contains(pr[0], "parameters differ") {
		t.Fatalf("drifted schema not reported: %v", pr)
	}
}
