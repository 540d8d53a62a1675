package state

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

func TestKernelToolDefinitions(t *testing.T) {
	e := newEnv(t, nil)
	tools := e.mg.KernelTools()
	var names []string
	for _, kt := range tools {
		names = append(names, kt.Def.Name)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(kt.Def.Parameters))
		if err != nil {
			t.Fatalf("%s: %v", kt.Def.Name, err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("mem://"+kt.Def.Name, doc); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compile("mem://" + kt.Def.Name); err != nil {
			t.Fatalf("%s schema: %v", kt.Def.Name, err)
		}
		if kt.Def.Summary == "" || kt.Handle == nil {
			t.Fatalf("%s incomplete", kt.Def.Name)
		}
	}
	if strings.Join(names, ",") != "plan.complete,workflow.request_exemption,session.set_mode" {
		t.Fatalf("tools %v", names)
	}
}

func handler(t *testing.T, mg *Manager, name string) func(ctx context.Context, call tool.Call, c policy.Caller) tool.Result {
	t.Helper()
	for _, kt := range mg.KernelTools() {
		if kt.Def.Name == name {
			return kt.Handle
		}
	}
	t.Fatalf("no kernel tool %s", name)
	return nil
}

func TestKernelToolHandlers(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	m, _ := e.session("s1", "")
	plan := handler(t, e.mg, ToolPlanComplete)
	exempt := handler(t, e.mg, ToolRequestExemption)
	mode := handler(t, e.mg, ToolSetMode)
	call := func(args string) tool.Call { return tool.Call{SessionID: "s1", Args: json.RawMessage(args)} }

	// plan.complete outside planning: the gate's refusal.
	res := plan(ctx, call(`{"plan":"p"}`), ai)
	if res.OK || res.Err == nil || res.Err.Code != CodeToolUnavailable {
		t.Fatalf("plan.complete in idle: %+v", res)
	}
	_, _ = m.Start(ctx, "task")
	for _, bad := range []string{`{"plan":"p","extra":1}`, `{"plan":""}`, `{"plan":"p"} {}`, `[]`, `{"plan":`} {
		if res := plan(ctx, call(bad), ai); res.OK || res.Err == nil || res.Err.Code != CodeBadArguments {
			t.Fatalf("args %s: %+v", bad, res)
		}
	}
	res = plan(ctx, call(`{"plan":"write TestParse first"}`), ai)
	var out struct {
		State, Mode, Writable, Next string
	}
	if !res.OK || json.Unmarshal(res.Output, &out) != nil || out.State != "test_writing" || !strings.Contains(out.Next, "fails") {
		t.Fatalf("plan.complete: %+v %s", res, res.Output)
	}
	if m.Status().Plan != "write TestParse first" {
		t.Fatalf("plan not recorded: %+v", m.Status())
	}

	res = exempt(ctx, call(`{"category":"documentation","affected_paths":["main.go"],"reason":"r"}`), ai)
	if res.OK || res.Err.Code != CodeExemptionDenied {
		t.Fatalf("exemption for main.go: %+v", res)
	}
	res = exempt(ctx, call(`{"category":"documentation","affected_paths":["docs/usage.md"],"reason":"document the flags"}`), ai)
	if !res.OK || !bytes.Contains(res.Output, []byte(`"granted":true`)) || m.Position().State != Exploring {
		t.Fatalf("exemption for docs/usage.md: %+v %s", res, res.Output)
	}

	_, _ = m.Cancel(ctx, "x")
	res = mode(ctx, call(`{"mode":"explore","reason":"prototype"}`), ai)
	if res.OK || res.Err.Code != CodeModeRefused || !bytes.Contains(res.Output, []byte(`"mode":"strict"`)) {
		t.Fatalf("AI asks explore: %+v %s", res, res.Output)
	}
	res = mode(ctx, call(`{"mode":"explore"}`), user)
	if !res.OK || m.Position().Mode != Explore {
		t.Fatalf("user asks explore: %+v", res)
	}
	if res := mode(ctx, tool.Call{SessionID: "nope", Args: json.RawMessage(`{"mode":"strict"}`)}, user); res.Err == nil || res.Err.Code != CodeBadSession {
		t.Fatalf("unknown session: %+v", res)
	}
	recs := e.records(audit.EventSessionModeChange)
	if len(recs) != 2 {
		t.Fatalf("mode change audit: %d records", len(recs))
	}
}
