package supervisor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// Tools lists the tools a tool plugin offers (starting it if needed).
func (s *Supervisor) Tools(ctx context.Context, name string) ([]tool.Def, error) {
	var defs []tool.Def
	err := s.withTool(ctx, name, "", func(ctx context.Context, c tool.Client) error {
		var err error
		defs, err = c.Tools(ctx)
		return err
	})
	return defs, err
}

// CallTool runs one tool call on plugin name. Transport failures, crashes
// and deadline overruns come back as structured errors and count toward
// the plugin's restart backoff and circuit breaker; a tool-level failure is
// a Result with Err set and counts as success for the plugin.
func (s *Supervisor) CallTool(ctx context.Context, name string, call tool.Call, onProgress func(tool.Progress)) (tool.Result, error) {
	res, _, err := s.ExecuteTool(ctx, name, call, onProgress)
	return res, err
}

// CallInfo says which instance served a tool call and where its output
// directory is on the host.
type CallInfo struct {
	InstanceID string
	OutDir     string
}

// ExecuteTool is CallTool that also reports the instance that ran the call.
func (s *Supervisor) ExecuteTool(ctx context.Context, name string, call tool.Call, onProgress func(tool.Progress)) (tool.Result, CallInfo, error) {
	var res tool.Result
	var info CallInfo
	err := s.useInstance(ctx, name, base.KindTool, call.Tool, func(ctx context.Context, inst *Instance) error {
		c, ok := inst.Raw.(tool.Client)
		if !ok {
			return fmt.Errorf("plugin %s: dispensed %T, not a tool client", name, inst.Raw)
		}
		info = CallInfo{InstanceID: inst.ID, OutDir: inst.OutDir}
		var err error
		var report func(tool.Progress)
		if onProgress != nil {
			co := newCoalescer(onProgress, s.opts.ProgressInterval, time.Now)
			defer co.flush()
			report = co.add
		}
		res, err = c.Execute(ctx, call, report)
		if res.Err != nil {
			ownError(name, res.Err)
		}
		if collect := inst.Launched.Collect; collect != nil {
			// The sandbox's /out is its own filesystem: bring it to the
			// host before anything reads it (a full /out fails the call).
			if cerr := collect(ctx); cerr != nil {
				res, err = tool.Result{}, cerr
			}
		}
		s.sanitizeOut(name, inst)
		return err
	})
	return res, info, err
}

func (s *Supervisor) withTool(ctx context.Context, name, toolName string, f func(context.Context, tool.Client) error) error {
	return s.use(ctx, name, base.KindTool, toolName, func(ctx context.Context, raw any) error {
		c, ok := raw.(tool.Client)
		if !ok {
			return fmt.Errorf("plugin %s: dispensed %T, not a tool client", name, raw)
		}
		return f(ctx, c)
	})
}

// Use runs f with the dispensed client of plugin name (tool.Client,
// provider.Client, vcs.Client, policyext.Client; runtime clients come from
// the sandbox package), starting the plugin if needed. An error from f
// that is not a structured plugin-level answer counts as a plugin failure:
// the instance is killed and restarted on next use, and the breaker counts
// it. kind, when set, must match the plugin's kind.
func (s *Supervisor) Use(ctx context.Context, name string, kind base.Kind, f func(ctx context.Context, client any) error) error {
	return s.use(ctx, name, kind, "", f)
}

func (s *Supervisor) use(ctx context.Context, name string, kind base.Kind, toolName string, f func(context.Context, any) error) error {
	return s.useInstance(ctx, name, kind, toolName, func(ctx context.Context, inst *Instance) error { return f(ctx, inst.Raw) })
}

func (s *Supervisor) useInstance(ctx context.Context, name string, kind base.Kind, toolName string, f func(context.Context, *Instance) error) error {
	m, err := s.get(name)
	if err != nil {
		return err
	}
	if kind != "" && m.spec.Kind != kind {
		return uerr.New(CodeKindUnsupported, fmt.Sprintf("plugin %s is a %s plugin, not a %s plugin", name, m.spec.Kind, kind), "the call needs a plugin of another kind", "choose a plugin of kind "+string(kind))
	}
	// Starting is bounded by the start timeout, not by the call's
	// deadline: a 100 ms policy-sandbox budget is for the call, and the
	// sandbox start must not eat it.
	sctx, scancel := context.WithTimeout(ctx, s.startBudget())
	defer scancel()
	var inst *Instance
	if toolName != "" && slices.Contains(m.spec.PerCallTools, toolName) {
		// lifetime: per_call — a fresh instance that never serves another call.
		inst, err = s.start(sctx, m.spec)
		if err != nil {
			m.mu.Lock()
			s.failedLocked(m, err)
			m.mu.Unlock()
			return err
		}
		defer inst.stop()
	} else {
		if inst, err = s.acquire(sctx, m); err != nil {
			return err
		}
		if s.opts.Views != nil {
			// A warm instance keeps its mount; bring what it shows up to
			// date (the session's changeset, the project, the policy).
			if _, err := s.opts.Views.View(sctx, m.spec); err != nil {
				return err
			}
		}
	}
	// The call's deadline is the plugin's sandbox timeout (its template's,
	// or lower if the manifest asks); CallTimeout only when it has none.
	timeout := m.spec.Limits.Timeout
	if timeout <= 0 {
		timeout = s.opts.CallTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := f(cctx, inst); err != nil {
		ownError(m.spec.Name, err)
		if ue, isUser := err.(*uerr.Error); isUser && (ue.Plugin != "" || ue.Code != base.CodeMalformed) {
			// A structured answer from the plugin: it is working as designed.
			s.succeeded(m)
			return err
		}
		return s.fail(m, inst, cctx, err)
	}
	s.succeeded(m)
	return nil
}

// ownError names the plugin in every plugin-reported error of err's chain
// that the protocol converter left unnamed (uerr.UnknownPlugin): the text
// is then shown as this plugin's.
func ownError(plugin string, err error) {
	for err != nil {
		ue, ok := uerr.As(err)
		if !ok {
			return
		}
		if ue.Plugin == uerr.UnknownPlugin {
			ue.Plugin = plugin
		}
		err = ue.Err
	}
}

// sanitizeOut leaves only regular files and directories, owned by the
// kernel's user with normalised modes, in the instance's output directory
// after each call (sandbox.SanitizeOut): nothing a plugin leaves there (a
// link to a host path, a FIFO, a setuid file, a name with an escape
// sequence) is ever collected or left for the user to trip over.
func (s *Supervisor) sanitizeOut(name string, inst *Instance) {
	if inst.OutDir == "" {
		return
	}
	removed, err := sandbox.SanitizeOut(inst.OutDir)
	if len(removed) > 0 {
		s.log.Warn("removed what is not a regular file or directory from a plugin's output", "plugin", name, "instance", inst.ID, "removed", removed)
	}
	if err != nil {
		s.log.Warn("normalising a plugin's output", "plugin", name, "instance", inst.ID, "error", err)
	}
}
