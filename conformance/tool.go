package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// MaxToolOutputBytes is the largest tool output the kernel accepts
// (TOOL-OUTPUT-001): half of gRPC's default 4 MiB message limit, so a result
// always fits one frame with its metadata. See
// docs/decisions/plugin-output-bounds.md.
const MaxToolOutputBytes = 2 << 20

func toolChecks() map[string]checkFunc {
	return map[string]checkFunc{
		"TOOL-SCHEMA-001":   checkToolSchemas,
		"TOOL-SCHEMA-002":   checkToolModes,
		"TOOL-ARGS-001":     checkToolMalformed,
		"TOOL-PATH-001":     checkToolPaths,
		"TOOL-OUTPUT-001":   checkToolOutputSize,
		"TOOL-PATCH-001":    checkToolPatch,
		"TOOL-WRITE-001":    checkToolWrites,
		"TOOL-PROGRESS-001": checkToolCancel,
	}
}

func (p *probe) toolBlocked() (outcome, bool) {
	if p.m != nil && p.m.Kind != manifests.KindTool {
		return na("the plugin is a %s plugin", p.m.Kind), true
	}
	return p.blocked()
}

// callTool runs one call and records what the tool profile watches.
func (p *probe) callTool(ctx context.Context, name string, args []byte) (tool.Result, error) {
	p.toolCalls++
	op := fmt.Sprintf("conf-%d", p.toolCalls)
	res, err := p.sup.CallTool(ctx, p.m.Name, tool.Call{ID: op, Tool: name, Args: args, SessionID: "conformance", SessionMode: "strict", OperationID: op}, nil)
	if err == nil {
		p.outputSizes = append(p.outputSizes, len(res.Output))
		if len(res.Output) > MaxToolOutputBytes {
			p.oversized = append(p.oversized, fmt.Sprintf("%s(%s) returned %d bytes", name, textsafe.Cap(string(args), 60), len(res.Output)))
		}
	}
	return res, err
}

var pathProps = []string{"path", "file", "filename", "file_path", "filepath", "dir", "directory", "target"}
var contentProps = []string{"content", "contents", "text", "new_content", "data", "body"}

type schemaObj struct {
	Type       any                        `json:"type"`
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

type propSchema struct {
	Type    any      `json:"type"`
	Enum    []any    `json:"enum"`
	Minimum *float64 `json:"minimum"`
}

func parseSchema(b []byte) (schemaObj, bool) {
	var s schemaObj
	if json.Unmarshal(b, &s) != nil {
		return s, false
	}
	return s, true
}

func typeOf(t any) string {
	switch v := t.(type) {
	case string:
		return v
	case []any:
		if len(v) > 0 {
			if s, ok := v[0].(string); ok {
				return s
			}
		}
	}
	return ""
}

// findProp returns the first property of s named in names with type string.
func findProp(s schemaObj, names []string) string {
	for _, n := range names {
		raw, ok := s.Properties[n]
		if !ok {
			continue
		}
		var ps propSchema
		if json.Unmarshal(raw, &ps) == nil && (typeOf(ps.Type) == "string" || ps.Type == nil) {
			return n
		}
	}
	return ""
}

// argsFor builds arguments that satisfy the schema's required properties
// with minimal values, then applies overrides.
func argsFor(s schemaObj, overrides map[string]any) []byte {
	obj := map[string]any{}
	for _, name := range s.Required {
		var ps propSchema
		_ = json.Unmarshal(s.Properties[name], &ps)
		switch {
		case len(ps.Enum) > 0:
			obj[name] = ps.Enum[0]
		default:
			switch typeOf(ps.Type) {
			case "integer", "number":
				v := 1.0
				if ps.Minimum != nil && *ps.Minimum > v {
					v = *ps.Minimum
				}
				obj[name] = v
			case "boolean":
				obj[name] = false
			case "array":
				obj[name] = []any{}
			case "object":
				obj[name] = map[string]any{}
			default:
				obj[name] = "x"
			}
		}
	}
	for k, v := range overrides {
		obj[k] = v
	}
	b, _ := json.Marshal(obj)
	return b
}

func checkToolSchemas(ctx context.Context, p *probe) outcome {
	if o, stop := p.toolBlocked(); stop {
		return o
	}
	defs, err := p.sup.Tools(ctx, p.m.Name)
	if err != nil {
		return fail("ListTools failed: %s", errText(err))
	}
	var problems []string
	listed := map[string]tool.Def{}
	for _, d := range defs {
		listed[d.Name] = d
	}
	for _, mt := range p.m.Tools {
		d, ok := listed[mt.Name]
		if !ok {
			problems = append(problems, fmt.Sprintf("tool %s is in plugin.yaml but ListTools does not list it", mt.Name))
			continue
		}
		delete(listed, mt.Name)
		if err := compileSchema(d.Parameters); err != nil {
			problems = append(problems, fmt.Sprintf("tool %s: parameters are not a valid JSON Schema object: %v", mt.Name, err))
		}
	}
	extra := make([]string, 0, len(listed))
	for n := range listed {
		extra = append(extra, n)
	}
	sort.Strings(extra)
	for _, n := range extra {
		problems = append(problems, fmt.Sprintf("ListTools lists %s, which plugin.yaml does not declare", n))
	}
	if len(problems) > 0 {
		return fail("%s\nfix: keep plugin.yaml's tools and the plugin's ListTools identical", strings.Join(problems, "\n"))
	}
	return pass("%d tools, schemas valid", len(defs))
}

func checkToolModes(ctx context.Context, p *probe) outcome {
	if o, stop := p.toolBlocked(); stop {
		return o
	}
	defs, err := p.sup.Tools(ctx, p.m.Name)
	if err != nil {
		return fail("ListTools failed: %s", errText(err))
	}
	var problems []string
	for _, d := range defs {
		mt, ok := p.m.Tool(d.Name)
		if !ok {
			continue
		}
		if d.OutputMode != "" && d.OutputMode != mt.OutputMode {
			problems = append(problems, fmt.Sprintf("tool %s: ListTools says output_mode %q, plugin.yaml %q", d.Name, d.OutputMode, mt.OutputMode))
		}
		if d.Lifetime != "" && d.Lifetime != mt.Lifetime {
			problems = append(problems, fmt.Sprintf("tool %s: ListTools says lifetime %q, plugin.yaml %q", d.Name, d.Lifetime, mt.Lifetime))
		}
	}
	if len(problems) > 0 {
		return fail("%s\nfix: set OutputMode/Lifetime in each tool.Def to what plugin.yaml declares (pluginsdk defaults an empty OutputMode to patch)", strings.Join(problems, "\n"))
	}
	return pass("output modes and lifetimes agree")
}

func compileSchema(b []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if _, ok := doc.(map[string]any); !ok {
		return fmt.Errorf("not an object")
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("params.json", doc); err != nil {
		return err
	}
	_, err = c.Compile("params.json")
	return err
}

// callFailed names what became of a call that returned no result, with the
// fix for whoever caused it: a timeout is the plugin not answering, a
// sandbox stopped from outside is nobody's fault in the plugin, and only a
// broken connection is the plugin crashing.
func callFailed(toolName, input string, err error) outcome {
	switch {
	case uerr.HasCode(err, supervisor.CodeCallTimeout):
		return fail("tool %s did not answer in time on %s: %s\nfix: refuse bad input at once with a structured error; a handler must not block or loop on it (and must honour ctx)", toolName, input, errText(err))
	case uerr.HasCode(err, sandbox.CodeKilledExternally):
		return fail("tool %s could not be checked on %s: its sandbox was stopped from outside fluffy (%s)\nfix: not the plugin's fault — find what else stops containers on this engine and run the check again", toolName, input, errText(err))
	}
	return fail("tool %s crashed on %s: %s\nfix: validate arguments and return a structured error (pluginsdk: return a *uerr.Error from the handler; the SDK also turns a panic into TOOL_PANIC)", toolName, input, errText(err))
}

func checkToolMalformed(ctx context.Context, p *probe) outcome {
	if o, stop := p.toolBlocked(); stop {
		return o
	}
	bad := []string{`{not json`, `[1,2,3]`, `"just a string"`}
	n := 0
	for _, t := range p.m.Tools {
		for _, b := range bad {
			n++
			res, err := p.callTool(ctx, t.Name, []byte(b))
			if err != nil {
				return callFailed(t.Name, "the malformed arguments "+b, err)
			}
			if res.OK {
				return fail("tool %s accepted the malformed arguments %s; it must refuse them with a structured error (e.g. TOOL_ARGS_INVALID)", t.Name, b)
			}
			if res.Err == nil || res.Err.Code == "" || res.Err.What == "" {
				return fail("tool %s refused %s without a structured error (code and what); return a *uerr.Error", t.Name, b)
			}
		}
	}
	return pass("%d malformed calls, each refused with a structured error", n)
}

type pathTool struct {
	name    string
	prop    string
	content string
	schema  schemaObj
	mode    string
}

func (p *probe) pathTools() []pathTool {
	var out []pathTool
	for _, t := range p.m.Tools {
		s, ok := parseSchema(t.ParametersJSON)
		if !ok {
			continue
		}
		prop := findProp(s, pathProps)
		if prop == "" {
			// A path argument the manifest declares (`paths:`), if it is a
			// top-level string.
			var names []string
			for _, d := range t.Paths {
				if !strings.ContainsAny(d.Arg, ".[") {
					names = append(names, d.Arg)
				}
			}
			prop = findProp(s, names)
		}
		if prop != "" {
			out = append(out, pathTool{name: t.Name, prop: prop, content: findProp(s, contentProps), schema: s, mode: t.OutputMode})
		}
	}
	return out
}

func checkToolPaths(ctx context.Context, p *probe) outcome {
	if o, stop := p.toolBlocked(); stop {
		return o
	}
	pts := p.pathTools()
	if len(pts) == 0 {
		return na("no tool has a path parameter (%s)", strings.Join(pathProps, ", "))
	}
	escapes := []string{"../outside/secret.txt", filepath.Join(p.outside, "secret.txt"), "escape-link/secret.txt", "src/../../outside/secret.txt"}
	n := 0
	for _, pt := range pts {
		for _, e := range escapes {
			over := map[string]any{pt.prop: e}
			if pt.content != "" {
				over[pt.content] = "overwritten by a conformance probe\n"
			}
			n++
			res, err := p.callTool(ctx, pt.name, argsFor(pt.schema, over))
			if err != nil {
				return callFailed(pt.name, fmt.Sprintf("%s=%q", pt.prop, e), err)
			}
			if bytes.Contains(res.Output, []byte(p.canary)) || (res.Err != nil && strings.Contains(res.Err.Error(), p.canary)) {
				return fail("tool %s leaked a file outside the workspace through %s=%q\nfix: resolve paths inside the workspace with os.Root (os.OpenRoot) and refuse .., absolute paths and symlinks that leave it", pt.name, pt.prop, e)
			}
			for _, ch := range res.Changes {
				if _, err := confine.Clean(ch.Path); err != nil {
					return fail("tool %s proposed a change to %q, outside the workspace, for %s=%q", pt.name, ch.Path, pt.prop, e)
				}
			}
			if res.OK {
				return fail("tool %s accepted %s=%q, which leaves the workspace; it must refuse it with a structured error (e.g. FS_PATH_ESCAPES)\nfix: resolve paths with os.Root (os.OpenRoot) and refuse .., absolute paths and symlinks out", pt.name, pt.prop, e)
			}
			if res.Err == nil || res.Err.Code == "" {
				return fail("tool %s refused %s=%q without a structured error code", pt.name, pt.prop, e)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(p.outside, "secret.txt")); err != nil || string(b) != p.canary+"\n" {
		return fail("a file outside the workspace was modified through a path escape")
	}
	return pass("%d escape attempts over %d tools, all refused", n, len(pts))
}

func checkToolOutputSize(ctx context.Context, p *probe) outcome {
	if o, stop := p.toolBlocked(); stop {
		return o
	}
	for _, pt := range p.pathTools() {
		if pt.mode == manifests.OutputPatch {
			continue
		}
		if _, err := p.callTool(ctx, pt.name, argsFor(pt.schema, map[string]any{pt.prop: "big.txt"})); err != nil {
			return fail("tool %s crashed on a 3 MiB file: %s", pt.name, errText(err))
		}
	}
	if len(p.oversized) > 0 {
		return fail("outputs over the %d-byte limit: %s\nfix: truncate large outputs (and say so in the output) or page them", MaxToolOutputBytes, strings.Join(p.oversized, "; "))
	}
	if len(p.outputSizes) == 0 {
		return skip("no call produced output to measure")
	}
	return pass("%d outputs, largest %d bytes (limit %d)", len(p.outputSizes), slices.Max(p.outputSizes), MaxToolOutputBytes)
}

func checkToolPatch(ctx context.Context, p *probe) outcome {
	if o, stop := p.toolBlocked(); stop {
		return o
	}
	var pt *pathTool
	for _, t := range p.pathTools() {
		if t.mode == manifests.OutputPatch && t.content != "" {
			pt = &t
			break
		}
	}
	if pt == nil {
		if !slices.ContainsFunc(p.m.Tools, func(t manifests.Tool) bool { return t.OutputMode == manifests.OutputPatch }) {
			return na("no tool declares output_mode patch")
		}
		// The item is exercised by asking for a known change of a known
		// file; a patch tool without both arguments cannot be asked that.
		return na("no patch-mode tool takes both a path (%s, or declared in paths:) and a content argument (%s)", strings.Join(pathProps, ", "), strings.Join(contentProps, ", "))
	}
	want := "hello\nconformance\nworld\n"
	res, err := p.callTool(ctx, pt.name, argsFor(pt.schema, map[string]any{pt.prop: "README.md", pt.content: want}))
	if err != nil {
		return fail("tool %s crashed on a plain write: %s", pt.name, errText(err))
	}
	if !res.OK {
		return fail("tool %s refused a plain write of README.md: %s", pt.name, errText(res.Err))
	}
	if len(res.Changes) != 1 {
		return fail("tool %s wrote README.md but reported %d changes; report exactly one FileChange per file (ToolContext.AddChange)", pt.name, len(res.Changes))
	}
	ch := res.Changes[0]
	if path.Clean(ch.Path) != "README.md" {
		return fail("the change names %q, not README.md", ch.Path)
	}
	if ch.Mode != tool.OutputPatch {
		return fail("tool %s declares output_mode patch but delivered mode %q", pt.name, ch.Mode)
	}
	art, err := p.findArtifact(ch.Artifact)
	if err != nil {
		return fail("%v\nfix: write the patch under <out_dir>/<operation_id>/ and put that relative path in FileChange.Artifact", err)
	}
	diff, _ := os.ReadFile(art)
	if !strings.Contains(string(diff), "@@") || !strings.Contains(string(diff), "+++ ") {
		return fail("the artifact %s of a patch-mode tool is not a unified diff (no ---/+++/@@ lines)\nfix: write a unified diff (lib/patch.Unified) for output_mode patch, or declare output_mode full", ch.Artifact)
	}
	orig, _ := os.ReadFile(filepath.Join(p.ws, "README.md"))
	got, err := patch.Apply(orig, string(diff))
	if err != nil {
		return fail("the patch %s does not apply to the workspace copy: %v", ch.Artifact, err)
	}
	if string(got) != want {
		return fail("the patch applies but yields %q, not the requested %q", textsafe.Cap(string(got), 80), want)
	}
	return pass("%s's patch %s applies cleanly", pt.name, ch.Artifact)
}

// findArtifact locates an artifact (relative to an instance's output
// directory) under the output root, refusing one that escapes it.
func (p *probe) findArtifact(rel string) (string, error) {
	c, err := confine.Clean(rel)
	if rel == "" || err != nil {
		return "", fmt.Errorf("artifact %q is not a path inside the output directory", rel)
	}
	m, _ := filepath.Glob(filepath.Join(p.outRoot, "*", filepath.FromSlash(c)))
	if len(m) == 0 {
		return "", fmt.Errorf("artifact %q does not exist under the output directory", rel)
	}
	return m[0], nil
}

func checkToolWrites(ctx context.Context, p *probe) outcome {
	if o, stop := p.toolBlocked(); stop {
		return o
	}
	if p.toolCalls == 0 {
		return skip("no tool call was made")
	}
	now, err := snapshot(p.ws)
	if err != nil {
		return fail("cannot read the workspace after the calls: %v", err)
	}
	var changed []string
	for k, v := range now {
		if p.wsSnap[k] != v {
			changed = append(changed, k)
		}
	}
	for k := range p.wsSnap {
		if _, ok := now[k]; !ok {
			changed = append(changed, k+" (deleted)")
		}
	}
	sort.Strings(changed)
	if len(changed) > 0 {
		return fail("after %d calls the workspace changed: %s\nfix: never write the workspace (it is read-only in the sandbox); write under the output directory and report a FileChange", p.toolCalls, strings.Join(changed, ", "))
	}
	ents, _ := os.ReadDir(p.outside)
	if len(ents) != 1 {
		return fail("files appeared beside the workspace: the plugin wrote outside its output directory")
	}
	return pass("workspace untouched after %d calls", p.toolCalls)
}

// cancelRace is how soon after the cancel a result may arrive without
// the cancelled flag: a call that finished as the Cancel frame was sent.
const cancelRace = 100 * time.Millisecond

// checkToolCancel cancels one call of every tool the manifest declares
// (each v2 tool can stream progress and must honour Cancel) and checks
// what comes back: a Result (not a stream the kernel had to cut after the
// grace), marked cancelled unless the call had already finished, and a
// healthy plugin afterwards.
func checkToolCancel(ctx context.Context, p *probe) outcome {
	if o, stop := p.toolBlocked(); stop {
		return o
	}
	if p.negotiated < 2 {
		return na("negotiated API v%d; cancellation frames exist from v2", p.negotiated)
	}
	if len(p.m.Tools) == 0 {
		return na("the plugin declares no tools")
	}
	var problems, seen []string
	for _, t := range p.m.Tools {
		s, _ := parseSchema(t.ParametersJSON)
		over := map[string]any{}
		if prop := findProp(s, pathProps); prop != "" {
			over[prop] = "big.txt"
		}
		// A cancel, not a deadline: the kernel sends a Cancel frame (a
		// call whose deadline passes is a timeout, not a cancellation).
		cctx, cancel := context.WithCancel(ctx)
		stop := time.AfterFunc(5*time.Millisecond, cancel)
		t0 := time.Now()
		res, err := p.callTool(cctx, t.Name, argsFor(s, over))
		took := time.Since(t0)
		stop.Stop()
		cancel()
		afterCancel := took - 5*time.Millisecond
		switch {
		case err != nil && took > tool.CancelGrace:
			problems = append(problems, fmt.Sprintf("%s: no result %s after the cancel (the kernel cut the call after the %s grace): %s", t.Name, afterCancel.Round(time.Millisecond), tool.CancelGrace, errText(err)))
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: the cancelled call ended without a result: %s", t.Name, errText(err)))
		case !res.Cancelled && afterCancel > cancelRace:
			problems = append(problems, fmt.Sprintf("%s: the result came %s after the cancel and is not marked cancelled (ok=%v); the handler ignored its context", t.Name, afterCancel.Round(time.Millisecond), res.OK))
		case res.Cancelled:
			seen = append(seen, fmt.Sprintf("%s cancelled in %s", t.Name, took.Round(time.Millisecond)))
		default:
			seen = append(seen, fmt.Sprintf("%s finished before the cancel (%s)", t.Name, took.Round(time.Millisecond)))
		}
		if err := p.use(ctx, func(ctx context.Context, raw any) error { return raw.(baseOf).Health(ctx) }); err != nil {
			return fail("after a cancelled call of %s the plugin is unhealthy: %s", t.Name, errText(err))
		}
	}
	if len(problems) > 0 {
		return fail("%s\nfix: pass the handler's ctx to everything that blocks and return when it is done; pluginsdk marks the result cancelled", strings.Join(problems, "\n"))
	}
	return pass("%s; plugin healthy", strings.Join(seen, "; "))
}

var _ = uerr.New
