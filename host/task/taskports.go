package task

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/state"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// ToolTestRun is the tool whose structured result drives the workflow.
const ToolTestRun = "test.run"

// testPlugin is the plugin whose view a test run sees; the view hash the
// machine compares is computed over that same view.
const testPlugin = "tool-test"

func kernelManifestTool(d tool.Def) (manifests.Tool, error) {
	return manifests.NewTool(d.Name, d.Summary, d.Parameters)
}

// providerModel is agent.Model over the task's provider plugin.
type providerModel struct{ t *Tasks }

func (p providerModel) Chat(ctx context.Context, req provider.ChatRequest, onEvent func(provider.Event)) error {
	name, model := p.t.current()
	if model != "" {
		req.Model = model
	}
	rec := p.t.recording()
	var events []provider.Event
	if rec != nil {
		inner := onEvent
		onEvent = func(e provider.Event) {
			events = append(events, e)
			inner(e)
		}
	}
	err := p.t.k.Plugins.Use(ctx, name, base.KindProvider, func(ctx context.Context, c any) error {
		pc, ok := c.(provider.Client)
		if !ok {
			return fmt.Errorf("plugin %s did not dispense a provider client", name)
		}
		return pc.Chat(ctx, req, onEvent)
	})
	if rec != nil && err == nil {
		p.t.record(rec, req, events)
	}
	return err
}

// workflow is agent.Workflow over the session's machine.
type workflow struct{ t *Tasks }

func (w workflow) Status() agent.Status {
	st := w.t.m.Status()
	return agent.Status{State: string(st.State), Mode: string(st.Mode), Writable: st.Writable, Available: st.Available, Changed: len(w.t.k.Session.Changes())}
}

func (w workflow) Start(ctx context.Context, task string) error {
	if w.t.m.State() != string(state.Idle) {
		return nil // a session in a task continues where it is
	}
	_, err := w.t.m.Start(ctx, task)
	return err
}

// stateView is state.View over the session workspace.
type stateView struct{ t *Tasks }

func (v stateView) ViewHash() string {
	h, err := v.t.hv.hash(context.Background())
	if err != nil {
		v.t.log.Warn("cannot hash the session view", "error", err)
		return ""
	}
	return h
}

func (v stateView) ChangedPaths() []string { return v.t.changedPaths() }

// changedPaths lists the paths the session's changeset touches.
func (t *Tasks) changedPaths() []string {
	var out []string
	for _, c := range t.k.Session.Changes() {
		out = append(out, c.Path)
	}
	return out
}

// modeApprover sends the machine's own reviews (debug mode) to the person.
type modeApprover struct{ t *Tasks }

func (a modeApprover) Approve(ctx context.Context, r state.ReviewRequest) (bool, error) {
	ap, err := a.t.review(ctx, agent.ReviewEvent{Kind: "mode", Summary: r.What + ": " + r.Why, Scopes: []string{router.ScopeOnce}})
	if err != nil {
		return false, err
	}
	return ap.Approved, nil
}

// toolApprover is router.Approver for the task's tool calls.
type toolApprover struct{ t *Tasks }

func (a toolApprover) Review(ctx context.Context, r router.ReviewRequest) (router.Approval, error) {
	key := r.Plugin + "\x00" + r.Tool + "\x00" + strings.Join(r.Reasons, "\x00")
	a.t.mu.Lock()
	ok := a.t.approved[key]
	a.t.mu.Unlock()
	if ok {
		return router.Approval{Approved: true, Scope: router.ScopeSession, By: "user (approved for this session)"}, nil
	}
	var paths []string
	for _, it := range r.Items {
		if it.Request.Path != "" {
			paths = append(paths, it.Request.Path)
		}
	}
	sum := fmt.Sprintf("%s %s", r.Tool, strings.Join(paths, ", "))
	if len(r.Reasons) > 0 {
		sum += " — " + strings.Join(r.Reasons, "; ")
	}
	ev := agent.ReviewEvent{Kind: "tool", Summary: sum, Scopes: []string{router.ScopeOnce, router.ScopeSession}}
	// "always" is offered when the policy can say exactly this: the
	// event carries the change it would propose.
	prop, perr := a.t.am.propose(r, a.t.k.MCPBridge != nil && a.t.k.MCPBridge(r.Plugin))
	if perr == nil {
		ev.Scopes = append(ev.Scopes, router.ScopeAlways)
		ev.Policy = prop.change(a.t.am.path)
	} else {
		a.t.log.Debug("\"always\" not offered", "tool", r.Tool, "why", uerr.From(perr).Why)
	}
	ap, err := a.t.review(ctx, ev)
	if err != nil {
		return router.Approval{}, err
	}
	if ap.Approved && ap.Scope == router.ScopeAlways {
		changed, note := a.t.always(ctx, prop)
		ap.Note = note
		if !changed {
			ap.Scope = router.ScopeOnce
		}
		return ap, nil
	}
	if ap.Approved && ap.Scope == router.ScopeSession {
		a.t.mu.Lock()
		a.t.approved[key] = true
		a.t.mu.Unlock()
	}
	return ap, nil
}

// taskTools is agent.Tools over the router: every call of the model goes
// through Router.Call with the session's gate, approver and ingester.
type taskTools struct{ t *Tasks }

func (tt *taskTools) List() []agent.Tool {
	k := tt.t.k
	var out []agent.Tool
	seen := map[string]bool{}
	for _, n := range k.KernelTools.Names() {
		if t, ok := k.KernelTools.Get(n); ok {
			out = append(out, agent.Tool{Name: n, Summary: t.Summary, Parameters: t.ParametersJSON})
			seen[n] = true
		}
	}
	names := k.Plugins.Names()
	sort.Strings(names)
	for _, n := range names {
		spec, ok := k.Plugins.Spec(n)
		if !ok || spec.Kind != base.KindTool {
			continue
		}
		m, err := k.Catalog.Manifest(spec)
		if err != nil {
			continue
		}
		for _, mt := range m.Tools {
			if seen[mt.Name] {
				continue // the router refuses ambiguous names; show one
			}
			seen[mt.Name] = true
			out = append(out, agent.Tool{Name: mt.Name, Summary: mt.Summary, Parameters: mt.ParametersJSON})
		}
	}
	for _, mt := range k.MCPTools() {
		if !seen[mt.Name] {
			seen[mt.Name] = true
			out = append(out, agent.Tool{Name: mt.Name, Summary: mt.Summary, Parameters: mt.ParametersJSON})
		}
	}
	return out
}

func (tt *taskTools) Access(name string, args json.RawMessage) agent.Access {
	if name == ToolTestRun {
		return agent.Access{Exclusive: true}
	}
	if _, ok := tt.t.k.KernelTools.Get(name); ok {
		return agent.Access{Exclusive: true}
	}
	target, err := tt.t.k.Catalog.Lookup("", name)
	if err != nil {
		return agent.Access{}
	}
	paths, err := target.Tool.PathArgs(args)
	if err != nil {
		return agent.Access{Exclusive: true}
	}
	var a agent.Access
	for _, p := range paths {
		if p.Write {
			a.Writes = append(a.Writes, p.Value)
		} else {
			a.Reads = append(a.Reads, p.Value)
		}
	}
	return a
}

func (tt *taskTools) session() *router.Session {
	t := tt.t
	s := &router.Session{ID: t.k.Session.ID(), Mode: string(t.m.Position().Mode), Caller: "model", Gate: t.m, Approver: toolApprover{t}}
	s.Ingester = t.k.Session
	return s
}

func (tt *taskTools) Call(ctx context.Context, id, name string, args json.RawMessage) agent.ToolResult {
	res := tt.t.k.Router.Call(ctx, tt.session(), router.Call{ID: id, Tool: name, Args: args})
	out := agent.ToolResult{OK: res.OK, Output: res.Output, Err: res.Err, Retryable: res.Retryable, Plugin: res.Plugin, Duration: res.Duration}
	for _, c := range res.Changes {
		out.Changes = append(out.Changes, c.Path)
	}
	out.Target = targetOf(args)
	if name == ToolTestRun && res.OK {
		tt.recordRun(ctx, res, &out)
	}
	return out
}

// recordRun feeds a test run's structured result to the workflow machine,
// stamped with the view it ran on (computed by the kernel, never taken
// from the plugin).
func (tt *taskTools) recordRun(ctx context.Context, res router.Result, out *agent.ToolResult) {
	run, err := testrun.Decode(res.Output)
	if err != nil {
		out.OK, out.Err = false, uerr.From(err)
		return
	}
	h, err := tt.t.hv.hash(ctx)
	if err != nil {
		out.OK, out.Err = false, uerr.Wrap(err, "TEST_RUN_UNSTAMPED", "the kernel could not identify the tree the tests ran on", err.Error(), "run the tests again")
		return
	}
	run.ViewHash = h
	out.TestStatus = string(run.Status)
	for _, x := range run.Tests {
		if x.Status == testrun.Fail {
			out.Failures = append(out.Failures, x.Name)
		}
	}
	out.Summary = fmt.Sprintf("%s: %d passed, %d failed", run.Status, run.Counts.Passed, run.Counts.Failed)
	if _, err := tt.t.m.RecordTestRun(ctx, run); err != nil {
		// The run stands; the workflow did not move. The model learns why.
		out.Summary += " (workflow: " + uerr.From(err).What + ")"
		var note json.RawMessage
		note, _ = json.Marshal(map[string]any{"run": json.RawMessage(res.Output), "workflow": uerr.From(err)})
		out.Output = note
	}
}

// targetOf is a call's main argument for display.
func targetOf(args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	for _, k := range []string{"path", "pattern", "glob", "command", "argv"} {
		if v, ok := m[k]; ok {
			s := fmt.Sprint(v)
			if len(s) > 120 {
				s = s[:120] + "…"
			}
			return s
		}
	}
	return ""
}

// viewHasher identifies the exact tree a test run sees: the sha256 over
// every file of the test plugin's view (path, mode, content). Content
// hashes are cached by inode, size and times, so only changed files are
// read again.
type viewHasher struct {
	k     *Deps
	mu    sync.Mutex
	cache map[string]fileSum
}

type fileSum struct {
	ino, size, mtime, ctime int64
	sum                     string
}

func newViewHasher(k *Deps) *viewHasher { return &viewHasher{k: k, cache: map[string]fileSum{}} }

func (h *viewHasher) hash(ctx context.Context) (string, error) {
	spec, ok := h.k.Plugins.Spec(testPlugin)
	if !ok {
		spec.Name, spec.Kind = testPlugin, base.KindTool
	}
	// The reader the test plugin's own view is prepared for (views.View).
	v, err := h.k.Session.Prepare(ctx, workspace.Reader{Caller: h.k.Caller(spec, ""), SessionMode: h.k.SessionMode, Sandbox: h.k.Sandbox(spec)})
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	sum := sha256.New()
	err = filepath.WalkDir(v.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(v.Dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			fmt.Fprintf(sum, "d %s\n", rel)
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			fmt.Fprintf(sum, "l %s %s\n", rel, target)
		case d.Type().IsRegular():
			fs, err := h.fileSum(p, fi)
			if err != nil {
				return err
			}
			fmt.Fprintf(sum, "f %s %o %s\n", rel, fi.Mode().Perm(), fs)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash view %s: %w", v.Dir, err)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

func (h *viewHasher) fileSum(p string, fi fs.FileInfo) (string, error) {
	st, _ := fi.Sys().(*syscall.Stat_t)
	var key fileSum
	if st != nil {
		key = fileSum{ino: int64(st.Ino), size: fi.Size(), mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
		if c, ok := h.cache[p]; ok && c.ino == key.ino && c.size == key.size && c.mtime == key.mtime && c.ctime == key.ctime {
			return c.sum, nil
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := sha256.New()
	if _, err := io.Copy(s, f); err != nil {
		return "", err
	}
	key.sum = hex.EncodeToString(s.Sum(nil))
	if st != nil {
		h.cache[p] = key
	}
	return key.sum, nil
}
