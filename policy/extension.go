package policy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Extension is a policy extension rule, done
// as a policy-kind plugin. The engine is the consumer; the plugin client in
// plugins/policyext implements it. Evaluate gets a context carrying the
// 100 ms deadline; Restart replaces a crashed or hung instance.
type Extension interface {
	Name() string
	Evaluate(ctx context.Context, req Request) (Verdict, error)
	Restart(ctx context.Context) error
}

// Verdict is an extension's answer. Deny and RequireReview need a Reason.
type Verdict struct {
	Action Action
	Reason string
}

// ErrMalformed marks an extension answer that is not a valid Verdict.
var ErrMalformed = errors.New("malformed extension verdict")

type extSlot struct {
	ext        Extension
	restarting atomic.Bool
	restarts   atomic.Int64
	failures   atomic.Int64
}

type extOutcome struct {
	v     Verdict
	err   error
	panic any
}

// invoke runs one extension call under timeout in its own goroutine, so
// that a hung or panicking extension cannot block or crash the kernel. It
// returns the verdict, or why the answer is unusable.
func (e *Engine) invoke(ctx context.Context, s *extSlot, req Request, timeout time.Duration) (Verdict, string) {
	name := s.ext.Name()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ch := make(chan extOutcome, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- extOutcome{panic: p}
			}
		}()
		v, err := s.ext.Evaluate(cctx, req)
		ch <- extOutcome{v: v, err: err}
	}()
	select {
	case out := <-ch:
		switch {
		case out.panic != nil:
			return Verdict{}, fmt.Sprintf("extension %s crashed: %v", name, out.panic)
		case out.err != nil:
			return Verdict{}, fmt.Sprintf("extension %s failed: %v", name, out.err)
		case !out.v.Action.Valid():
			return Verdict{}, fmt.Sprintf("extension %s: %v: unknown action %d", name, ErrMalformed, out.v.Action)
		case (out.v.Action == Deny || out.v.Action == RequireReview) && out.v.Reason == "":
			return Verdict{}, fmt.Sprintf("extension %s: %v: %s without a reason", name, ErrMalformed, out.v.Action)
		}
		return out.v, ""
	case <-cctx.Done():
		if ctx.Err() != nil {
			return Verdict{}, fmt.Sprintf("extension %s: request cancelled: %v", name, ctx.Err())
		}
		return Verdict{}, fmt.Sprintf("extension %s did not answer within %v", name, timeout)
	}
}

// callExtension evaluates one extension. A panic, an error, a missed
// deadline or a malformed verdict is a deny, and the extension is
// restarted in the background.
func (e *Engine) callExtension(ctx context.Context, s *extSlot, req *Request) RuleEval {
	name := s.ext.Name()
	ev := RuleEval{Rule: "extension:" + name, Layer: LayerExtension}
	v, why := e.invoke(ctx, s, *req, e.extTO)
	if why == "" {
		ev.Matched = v.Action != Pass
		ev.Action, ev.Reason = v.Action, v.Reason
		if ev.Matched && ev.Reason == "" {
			ev.Reason = "extension " + name + ": " + v.Action.String()
		}
		return ev
	}
	ev.Matched, ev.Action, ev.Reason, ev.Note = true, Deny, why+" (treated as deny)", "extension failure"
	s.failures.Add(1)
	e.log.Warn("policy extension failed; denying and restarting", "extension", name, "why", why)
	if ctx.Err() == nil {
		e.restart(s)
	}
	return ev
}

// restart restarts an extension in the background, once at a time.
func (e *Engine) restart(s *extSlot) {
	if e.closed.Load() || !s.restarting.CompareAndSwap(false, true) {
		return
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		defer s.restarting.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), e.restTO)
		defer cancel()
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("restart panicked: %v", p)
				}
			}()
			return s.ext.Restart(ctx)
		}()
		s.restarts.Add(1)
		if err != nil {
			e.log.Error("policy extension restart failed", "extension", s.ext.Name(), "error", err)
			return
		}
		e.log.Info("policy extension restarted", "extension", s.ext.Name())
	}()
}

// SetExtensions replaces the extensions the engine consults (the kernel
// does when the policy in force names other ones). An extension whose name
// was already consulted keeps its counters.
func (e *Engine) SetExtensions(xs []Extension) {
	old := map[string]*extSlot{}
	for _, s := range e.slots() {
		old[s.ext.Name()] = s
	}
	slots := make([]*extSlot, 0, len(xs))
	for _, x := range xs {
		s := &extSlot{ext: x}
		if o, ok := old[x.Name()]; ok {
			s.failures.Store(o.failures.Load())
			s.restarts.Store(o.restarts.Load())
		}
		slots = append(slots, s)
	}
	e.exts.Store(&slots)
}

func (e *Engine) slots() []*extSlot {
	if p := e.exts.Load(); p != nil {
		return *p
	}
	return nil
}

// ExtensionStats reports, per extension name, failures and restarts.
type ExtensionStats struct {
	Name     string
	Failures int64
	Restarts int64
}

// Extensions returns the extensions' counters.
func (e *Engine) Extensions() []ExtensionStats {
	slots := e.slots()
	out := make([]ExtensionStats, 0, len(slots))
	for _, s := range slots {
		out = append(out, ExtensionStats{s.ext.Name(), s.failures.Load(), s.restarts.Load()})
	}
	return out
}

// WarmupSyscall is the syscall of the warm-up request sent at load.
const WarmupSyscall = "policy.warmup"

// Warm sends every extension one warm-up evaluation (pre-loaded
// at kernel startup so the first real call does not pay the cold start),
// with timeout instead of the 100 ms budget. A failing extension is
// restarted; the joined errors are returned.
func (e *Engine) Warm(ctx context.Context, timeout time.Duration) error {
	var errs []error
	for _, s := range e.slots() {
		if _, why := e.invoke(ctx, s, Request{Syscall: WarmupSyscall, Caller: Caller{Kind: "kernel"}}, timeout); why != "" {
			errs = append(errs, fmt.Errorf("warm up policy extension: %s", why))
			s.failures.Add(1)
			e.restart(s)
		}
	}
	return errors.Join(errs...)
}
