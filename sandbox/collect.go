package sandbox

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// collectTimeout bounds one copy of /out to the host.
const collectTimeout = 2 * time.Minute

// collectedUnary is the one unary call whose output the kernel reads from
// /out right after it returns (inside the caller's callback, where the
// supervisor cannot collect): a VCS commit's objects. Tool calls are
// collected by the supervisor (Launched.Collect); every other call skips
// the copy, which costs an engine archive round trip (~0.1 s).
const collectedUnary = "/fluffy.vcs.v1.VCS/Commit"

// collectUnary is the gRPC interceptor that copies /out to the host after
// a VCS commit.
func (r *containerRunner) collectUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return collectAfterCommit(r.collect)(ctx, method, req, reply, cc, invoker, opts...)
}

// collectAfterCommit is a gRPC interceptor that runs collect after a VCS
// commit (collectedUnary) and fails the call when the copy does.
func collectAfterCommit(collect func(context.Context) error) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if method != collectedUnary {
			return err
		}
		if cerr := collect(ctx); cerr != nil {
			return cerr
		}
		return err
	}
}

// collect checks the container's socket tmpfs, when it has one, and
// copies its /out (a tmpfs of the template's OutBytes: a write past it
// fails with ENOSPC inside) to the host OutDir. When either is full it
// stops the sandbox, empties the host OutDir and returns
// SANDBOX_QUOTA_EXCEEDED; what a later Wait or Status reports says the
// same.
func (r *containerRunner) collect(ctx context.Context) error {
	r.collectMu.Lock()
	defer r.collectMu.Unlock()
	r.mu.Lock()
	over := r.over
	sockFull := r.guest != nil && r.guest.full()
	r.mu.Unlock()
	if over != nil {
		return exitError(r.spec.Name, r.limits, rt.Exit{}, false, over.String())
	}
	if r.id == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), collectTimeout)
	defer cancel()
	if sockFull {
		return r.stopFull(ctx, overQuota{what: GuestSocketDir + " (its socket directory)", dir: GuestSocketDir, used: sockQuotaBytes, limit: sockQuotaBytes, full: true})
	}
	if !r.outVolume {
		return nil
	}
	rc, err := r.c.archiver.CopyFrom(ctx, r.id, GuestOut)
	if err != nil {
		return fmt.Errorf("sandbox %s: read /out: %w", r.spec.Name, err)
	}
	res, err := copyOut(rc, r.spec.OutDir, r.limits.OutBytes)
	rc.Close()
	if len(res.skipped) > 0 {
		r.c.log.Warn("not copied from a plugin's /out: neither a regular file nor a directory", "plugin", r.spec.Name, "entries", len(res.skipped))
	}
	if !res.over {
		if err != nil {
			return fmt.Errorf("sandbox %s: copy /out: %w", r.spec.Name, err)
		}
		return nil
	}
	return r.stopFull(ctx, overQuota{what: GuestOut, dir: r.spec.OutDir, used: res.used, limit: r.limits.OutBytes, entries: res.entries, max: quotaMaxEntries, full: true})
}

// stopFull stops the sandbox for a full filesystem q and empties the host
// OutDir.
func (r *containerRunner) stopFull(ctx context.Context, q overQuota) error {
	r.mu.Lock()
	r.over = &q
	r.mu.Unlock()
	r.killing.Store(true)
	r.lc.Fail("stopped: " + q.String())
	if kerr := r.c.cfg.Runtime.Kill(ctx, r.id, ""); kerr != nil {
		r.c.log.Warn("stopping a sandbox over its disk quota", "plugin", r.spec.Name, "error", kerr)
	}
	if r.spec.OutDir != "" {
		if derr := emptyDir(r.spec.OutDir); derr != nil {
			r.c.log.Warn("discarding an output over its quota", "dir", r.spec.OutDir, "error", derr)
		}
	}
	r.c.log.Warn("sandbox stopped: disk quota exceeded", "plugin", r.spec.Name, "dir", q.what, "bytes", q.used, "limit", q.limit, "entries", q.entries)
	return exitError(r.spec.Name, r.limits, rt.Exit{}, false, q.String())
}
