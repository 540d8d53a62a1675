package pluginsdk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// ServeTool serves a tool plugin. It blocks until the kernel disconnects.
func ServeTool(impl tool.Plugin, opts ...Option) {
	o := buildOptions(impl.Info().Name, opts)
	serve(tool.PluginSets(impl, o.versions), o)
}

// Handler runs one tool. It returns a JSON-marshalable output, or an error:
// a *uerr.Error is a tool-level failure the AI sees; any other error is
// reported as TOOL_FAILED with its text.
type Handler func(ctx context.Context, tc *ToolContext, args json.RawMessage) (any, error)

// ToolSpec is one tool with its handler.
type ToolSpec struct {
	tool.Def
	Handler Handler
}

// ToolSet implements tool.Plugin from a list of ToolSpecs.
type ToolSet struct {
	Name    string
	Version string
	Specs   []ToolSpec
	// APIVersions defaults to every version the kernel supports.
	APIVersions []int
	// OnConfigure, if set, runs after the kernel's Configure.
	OnConfigure func(ctx context.Context, cfg base.Config, kernel base.KernelClient) error
	Logger      hclog.Logger

	mu     sync.RWMutex
	cfg    base.Config
	kernel base.KernelClient
}

// ToolContext is what a Handler gets besides its arguments.
type ToolContext struct {
	Call tool.Call
	// Workspace is the read-only project root; OutDir is where writes go.
	Workspace string
	OutDir    string
	Kernel    base.KernelClient // nil when the kernel offered none
	Logger    hclog.Logger
	report    func(tool.Progress)
	changes   []tool.FileChange
}

// Progress reports progress (shown to the user under API v2).
func (c *ToolContext) Progress(msg string, fraction float64) {
	c.report(tool.Progress{Message: msg, Fraction: fraction})
}

// AddChange records a write proposed through the output directory.
func (c *ToolContext) AddChange(ch tool.FileChange) { c.changes = append(c.changes, ch) }

func (s *ToolSet) Info() base.Info {
	vs := s.APIVersions
	if len(vs) == 0 {
		vs = base.SupportedAPIVersions()
	}
	return base.Info{Name: s.Name, Kind: base.KindTool, Version: s.Version, APIVersions: vs}
}

func (s *ToolSet) Configure(ctx context.Context, cfg base.Config, kernel base.KernelClient) error {
	s.mu.Lock()
	s.cfg, s.kernel = cfg, kernel
	s.mu.Unlock()
	if s.OnConfigure != nil {
		return s.OnConfigure(ctx, cfg, kernel)
	}
	return nil
}

func (s *ToolSet) Health(context.Context) error { return nil }

func (s *ToolSet) Tools(context.Context) ([]tool.Def, error) {
	out := make([]tool.Def, len(s.Specs))
	for i, t := range s.Specs {
		d := t.Def
		if d.OutputMode == "" {
			d.OutputMode = tool.OutputPatch
		}
		if d.Lifetime == "" {
			d.Lifetime = tool.LifetimeSession
		}
		out[i] = d
	}
	return out, nil
}

func (s *ToolSet) Execute(ctx context.Context, call tool.Call, report func(tool.Progress)) (tool.Result, error) {
	var spec *ToolSpec
	for i := range s.Specs {
		if s.Specs[i].Name == call.Tool {
			spec = &s.Specs[i]
			break
		}
	}
	if spec == nil {
		return tool.Result{Err: uerr.New("TOOL_UNKNOWN", fmt.Sprintf("plugin %s has no tool %q", s.Name, call.Tool),
			"the call named a tool this plugin does not list", "call one of the tools the plugin lists")}, nil
	}
	if len(call.Args) > 0 && !json.Valid(call.Args) {
		return tool.Result{Err: uerr.New("TOOL_ARGS_INVALID", fmt.Sprintf("arguments to %s are not valid JSON", call.Tool),
			"the argument bytes do not parse as JSON", "send a JSON object matching the tool's parameter schema")}, nil
	}
	s.mu.RLock()
	cfg, kernel := s.cfg, s.kernel
	s.mu.RUnlock()
	logger := s.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	tc := &ToolContext{Call: call, Workspace: cfg.Workspace, OutDir: cfg.OutDir, Kernel: kernel, Logger: logger, report: report}
	out, panicked, err := runHandler(ctx, spec.Handler, tc, call.Args)
	if panicked != nil {
		logger.Error("tool handler panicked", "tool", call.Tool, "at", panicked.site, "panic", panicked.value, "stack", panicked.stack)
		return tool.Result{Err: uerr.New(CodeToolPanic, fmt.Sprintf("%s panicked at %s", call.Tool, panicked.site),
			"panic: "+panicked.value,
			fmt.Sprintf("this is a bug in plugin %s, not in the call: report it to the plugin's author with the arguments (the plugin log has the stack); the plugin keeps running", s.Name)),
			Changes: tc.changes}, nil
	}
	if err != nil {
		if ue, ok := uerr.As(err); ok {
			return tool.Result{Err: ue, Changes: tc.changes}, nil
		}
		if ctx.Err() != nil {
			return tool.Result{Err: uerr.Wrap(err, "TOOL_CANCELLED", call.Tool+" was cancelled", context.Cause(ctx).Error(), "retry with a longer deadline if the call needs more time")}, nil
		}
		return tool.Result{Err: uerr.Wrap(err, "TOOL_FAILED", call.Tool+" failed", err.Error(), "check the arguments; see the plugin log for details")}, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return tool.Result{}, fmt.Errorf("marshal %s output: %w", call.Tool, err)
	}
	return tool.Result{OK: true, Output: b, Changes: tc.changes}, nil
}

// CodeToolPanic is the error code of a handler that panicked.
const CodeToolPanic = "TOOL_PANIC"

type handlerPanic struct{ site, value, stack string }

// runHandler calls h and turns a panic into a handlerPanic: without this a
// panic in one handler kills the plugin process (go-plugin's gRPC server
// does not recover) and the kernel can only report a crash with no place.
func runHandler(ctx context.Context, h Handler, tc *ToolContext, args json.RawMessage) (out any, p *handlerPanic, err error) {
	defer func() {
		if r := recover(); r != nil {
			v := fmt.Sprint(r)
			if len(v) > 500 {
				v = v[:500] + "…"
			}
			p = &handlerPanic{site: panicSite(), value: v, stack: string(debug.Stack())}
		}
	}()
	out, err = h(ctx, tc, args)
	return out, nil, err
}

// panicSite is file:line of the frame that panicked: the first frame below
// runtime.gopanic that is not in the runtime (a nil dereference passes
// through runtime.sigpanic).
func panicSite() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(0, pcs)])
	seenPanic := false
	for {
		f, more := frames.Next()
		if f.Function == "runtime.gopanic" {
			seenPanic = true
		} else if seenPanic && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s:%d (%s)", f.File, f.Line, f.Function)
		}
		if !more {
			return "an unknown place"
		}
	}
}

// DecodeArgs unmarshals a tool's arguments into v strictly: unknown fields
// and wrong types are a TOOL_ARGS_INVALID error the AI can act on. Empty
// arguments count as `{}`.
func DecodeArgs(toolName string, args json.RawMessage, v any) error {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return uerr.Wrap(err, "TOOL_ARGS_INVALID", fmt.Sprintf("arguments to %s do not match its schema", toolName),
			err.Error(), "send a JSON object with the documented fields and types")
	}
	return nil
}
