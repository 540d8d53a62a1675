package state

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// CodeBadArguments: a kernel tool's arguments do not fit its schema.
const CodeBadArguments = "STATE_BAD_ARGUMENTS"

// KernelTool is a tool the kernel serves itself (no plugin): its
// definition, registered by the router next to plugin tools, and its
// handler. caller is who the router judges the call as (the AI's calls
// come from the provider that made them).
type KernelTool struct {
	Def    tool.Def
	Handle func(ctx context.Context, call tool.Call, caller policy.Caller) tool.Result
}

// Maximum size of a kernel tool's arguments.
const maxArgsBytes = 64 << 10

var planSchema = `{
  "type": "object",
  "properties": {
    "plan": {"type": "string", "minLength": 1, "maxLength": 16000,
             "description": "The plan: what will change, which tests will show it, which files are touched."}
  },
  "required": ["plan"],
  "additionalProperties": false
}`

var exemptionSchema = `{
  "type": "object",
  "properties": {
    "category": {"type": "string", "enum": ["config_change", "type_refactor", "documentation", "asset_update"],
                 "description": "Why TDD does not apply: configuration, type declarations, documentation or assets."},
    "affected_paths": {"type": "array", "minItems": 1, "maxItems": 100,
                       "items": {"type": "string", "minLength": 1, "maxLength": 4096},
                       "description": "Every project-relative file the change touches; each must match the category's configured globs."},
    "reason": {"type": "string", "minLength": 1, "maxLength": 2000}
  },
  "required": ["category", "affected_paths", "reason"],
  "additionalProperties": false
}`

var modeSchema = `{
  "type": "object",
  "properties": {
    "mode": {"type": "string", "enum": ["strict", "explore", "debug"]},
    "reason": {"type": "string", "maxLength": 2000}
  },
  "required": ["mode"],
  "additionalProperties": false
}`

// KernelTools returns plan.complete, workflow.request_exemption and
// session.set_mode. Each handler drives the machine of call.SessionID.
func (mg *Manager) KernelTools() []KernelTool {
	def := func(name, summary, schema string) tool.Def {
		var b bytes.Buffer
		_ = json.Compact(&b, []byte(schema))
		return tool.Def{Name: name, Summary: summary, Parameters: json.RawMessage(b.Bytes()), OutputMode: tool.OutputFull, Lifetime: tool.LifetimeSession}
	}
	return []KernelTool{
		{Def: def(ToolPlanComplete, "End planning: strict mode continues with writing a failing test, explore mode with the change itself.", planSchema),
			Handle: mg.handlePlan},
		{Def: def(ToolRequestExemption, "Ask to skip the failing-test step for configuration, type declarations, documentation or assets (strict mode, before code is written).", exemptionSchema),
			Handle: mg.handleExemption},
		{Def: def(ToolSetMode, "Ask to switch the session mode (strict, explore, debug); the policy decides and debug needs a human review.", modeSchema),
			Handle: mg.handleMode},
	}
}

func (mg *Manager) machineOf(call tool.Call) (*Machine, *uerr.Error) {
	m, ok := mg.Machine(call.SessionID)
	if !ok {
		return nil, uerr.New(CodeBadSession, fmt.Sprintf("no open session %q", clip(call.SessionID, 128)), "kernel tools act on the session that called them", "call the tool within a session")
	}
	return m, nil
}

// decodeArgs decodes strictly: unknown fields, trailing data and oversized
// input are errors (the router validates the schema too).
func decodeArgs(raw json.RawMessage, v any) *uerr.Error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if len(raw) > maxArgsBytes {
		return uerr.New(CodeBadArguments, "arguments too large", fmt.Sprintf("%d bytes, the limit is %d", len(raw), maxArgsBytes), "send shorter arguments")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return uerr.New(CodeBadArguments, "arguments do not match the tool's schema", err.Error(), "follow the tool's JSON Schema")
	}
	if d.More() {
		return uerr.New(CodeBadArguments, "arguments do not match the tool's schema", "trailing data after the JSON object", "send one JSON object")
	}
	return nil
}

func result(out any, err error) tool.Result {
	var res tool.Result
	if out != nil {
		b, merr := json.Marshal(out)
		if merr != nil {
			return tool.Result{Err: uerr.From(merr)}
		}
		res.Output = b
	}
	if err != nil {
		res.Err = uerr.From(err) // every typed error here unwraps to its *uerr.Error
		return res
	}
	res.OK = true
	return res
}

// nextStep tells the AI what the state expects of it.
func (r *Rules) nextStep(p Position) string {
	switch p.State {
	case TestWriting:
		return "Write a test that fails for the planned change (test paths: " + r.testPathList() + ") and run test.run; if the project's existing tests already fail for it, just run them. Source files become writable once a run on the current tree is red: a test fails, or a package that has tests does not build."
	case CodeWriting:
		return "Change the source until the tests pass, then run test.run to validate; test files are read-only now."
	case Exploring:
		if p.Exemption != nil {
			return "Change only the exempted files, then run test.run to validate."
		}
		return "Make the change, then run test.run to validate it."
	case RetroactiveTesting:
		return "Write tests for the change, then run test.run."
	case Reviewing:
		return "The change is being reviewed."
	}
	return ""
}

type stepOutput struct {
	State    State  `json:"state"`
	Mode     Mode   `json:"mode"`
	Writable string `json:"writable"`
	Next     string `json:"next,omitempty"`
}

func (m *Machine) step() stepOutput {
	p := m.Position()
	return stepOutput{State: p.State, Mode: p.Mode, Writable: m.mg.rules.writableText(p), Next: m.mg.rules.nextStep(p)}
}

func (mg *Manager) handlePlan(ctx context.Context, call tool.Call, caller policy.Caller) tool.Result {
	m, ue := mg.machineOf(call)
	if ue != nil {
		return tool.Result{Err: ue}
	}
	var a struct {
		Plan string `json:"plan"`
	}
	if ue := decodeArgs(call.Args, &a); ue != nil {
		return tool.Result{Err: ue}
	}
	if a.Plan == "" {
		return tool.Result{Err: uerr.New(CodeBadArguments, "plan.complete needs the plan", "the plan is recorded with the transition", "pass {\"plan\": \"...\"}")}
	}
	if err := m.Allowed(ToolPlanComplete, "", false); err != nil {
		return result(m.step(), err)
	}
	_, err := m.PlanComplete(ctx, a.Plan, actorOf(caller))
	return result(m.step(), err)
}

func (mg *Manager) handleExemption(ctx context.Context, call tool.Call, caller policy.Caller) tool.Result {
	m, ue := mg.machineOf(call)
	if ue != nil {
		return tool.Result{Err: ue}
	}
	var req ExemptionRequest
	if ue := decodeArgs(call.Args, &req); ue != nil {
		return tool.Result{Err: ue}
	}
	ex, err := m.RequestExemption(ctx, req, actorOf(caller))
	type out struct {
		Granted   bool       `json:"granted"`
		Exemption *Exemption `json:"exemption,omitempty"`
		stepOutput
	}
	o := out{Granted: err == nil, stepOutput: m.step()}
	if err == nil {
		o.Exemption = &ex
	}
	return result(o, err)
}

func (mg *Manager) handleMode(ctx context.Context, call tool.Call, caller policy.Caller) tool.Result {
	m, ue := mg.machineOf(call)
	if ue != nil {
		return tool.Result{Err: ue}
	}
	var a struct {
		Mode   Mode   `json:"mode"`
		Reason string `json:"reason"`
	}
	if ue := decodeArgs(call.Args, &a); ue != nil {
		return tool.Result{Err: ue}
	}
	_, err := m.SetMode(ctx, ModeRequest{Mode: a.Mode, Reason: a.Reason, Caller: caller})
	type out struct {
		Requested Mode `json:"requested"`
		stepOutput
	}
	return result(out{Requested: a.Mode, stepOutput: m.step()}, err)
}
