package kernel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// Sandbox runtimes a user can choose (--sandbox / FLUFFY_SANDBOX).
const (
	SandboxDocker = "docker" // default: L2 containers through the runtime-docker adapter
	SandboxBwrap  = "bwrap"  // daemonless; no memory/CPU/pids limits
	SandboxNone   = "none"   // plain subprocesses: development only, loudly warned
)

// HomeBinaries opens the kernel's binary store, $FLUFFY_HOME/cas: every
// plugin binary the kernel runs is a verified copy in it.
func HomeBinaries(home string) (*sandbox.BinaryStore, error) {
	return sandbox.OpenBinaryStore(filepath.Join(home, "cas"))
}

// sandboxes owns the L2 machinery of one kernel: its lease, the runtime
// adapter process, and the launcher the supervisor uses.
type sandboxes struct {
	lease    *sandbox.Lease
	adapter  *plugin.Client
	launcher supervisor.Launcher
	pending  *pendingLauncher // docker being prepared in the background
	log      hclog.Logger
}

func (s *sandboxes) close() {
	if p := s.pending; p != nil {
		p.stop()
		if c, ok := p.launcher.(*sandbox.Containers); ok && p.err == nil {
			s.removeOwn(c)
		}
		if p.adapter != nil {
			p.adapter.Kill()
		}
	}
	if c, ok := s.launcher.(*sandbox.Containers); ok {
		s.removeOwn(c)
	}
	if s.adapter != nil {
		s.adapter.Kill()
	}
	if s.lease != nil {
		_ = s.lease.Release()
	}
}

// removeOwn removes what the kernel's containers left on the engine, while
// the adapter still runs: a container the kernel lost track of (its wait
// broke when the engine stopped answering) would otherwise outlive it
// until another kernel of the home reaps it.
func (s *sandboxes) removeOwn(c *sandbox.Containers) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.RemoveOwn(ctx); err != nil && s.log != nil {
		s.log.Warn("could not remove this kernel's sandboxes; the next kernel start of this home reaps them", "error", err)
	}
}

// openSandboxes prepares the chosen runtime. For docker it starts the
// runtime adapter in its bubblewrap jail, reaps what dead kernels left
// behind, and readies the base image; an unreachable engine is a structured
// error with install guidance (no silent degradation).
func openSandboxes(ctx context.Context, o Options, log hclog.Logger) (*sandboxes, error) {
	kind := o.Sandbox
	if kind == "" {
		kind = SandboxDocker
	}
	runDir := filepath.Join(o.Home, "run")
	if kind != SandboxNone {
		if err := sandbox.CheckRunDir(runDir); err != nil {
			return nil, err
		}
	}
	lease, err := sandbox.AcquireLease(runDir, sandbox.NewKernelID())
	if err != nil {
		return nil, err
	}
	s := &sandboxes{lease: lease, log: log}
	switch kind {
	case SandboxNone:
		log.Warn("SANDBOX DISABLED: plugins run as plain subprocesses with your privileges (--sandbox=none); use only for plugin development")
		s.launcher = sandbox.Subprocess{}
	case SandboxBwrap:
		s.launcher = &sandbox.Bwrap{Lease: lease, Logger: log}
	case SandboxDocker:
		if !o.SandboxInBackground {
			if err := s.startDocker(ctx, o, lease, runDir, log); err != nil {
				s.close()
				return nil, err
			}
			break
		}
		// The kernel answers its clients while the adapter starts and the
		// image is readied (most of a cold start); the first plugin start
		// waits for it and gets its error, if any.
		bg, cancel := context.WithCancel(context.Background())
		p := &pendingLauncher{done: make(chan struct{}), cancel: cancel}
		s.launcher, s.pending = p, p
		bo := o
		bo.Progress = nil // nobody waits on these lines any more
		go func() {
			defer close(p.done)
			defer cancel()
			var ready sandboxes
			p.err = ready.startDocker(bg, bo, lease, runDir, log)
			p.launcher, p.adapter = ready.launcher, ready.adapter
			switch {
			case p.err != nil && bg.Err() != nil:
				log.Debug("sandbox preparation abandoned: the kernel is closing", "error", p.err)
			case p.err != nil:
				log.Error("the container sandbox could not be prepared; plugins cannot start", "error", p.err)
			}
		}()
	default:
		s.close()
		return nil, uerr.New("USAGE", fmt.Sprintf("unknown sandbox runtime %q", kind), "fluffy knows docker, bwrap and none", "use --sandbox=docker (default), bwrap, or none")
	}
	return s, nil
}

// startDocker launches the runtime adapter in its jail, reaps what dead
// kernels left behind and readies the base image. On error nothing it
// started is left running.
func (s *sandboxes) startDocker(ctx context.Context, o Options, lease *sandbox.Lease, runDir string, log hclog.Logger) error {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	bin, err := sandbox.FindAdapter(getenv)
	if err != nil {
		return uerr.Wrap(err, "RUNTIME_ADAPTER_MISSING", "the runtime-docker adapter plugin was not found", err.Error(),
			"run `make build` (it puts the adapter in bin/plugins/runtime-docker/), or set FLUFFY_RUNTIME_ADAPTER")
	}
	if o.Progress != nil {
		o.Progress("starting the container runtime adapter")
	}
	bins, err := HomeBinaries(o.Home)
	if err != nil {
		return err
	}
	pc, rtc, err := sandbox.LaunchAdapter(ctx, &sandbox.AdapterJail{Lease: lease, EngineSocket: sandbox.EngineSocketFromEnv(getenv), Logger: log, Binaries: bins, InL1: getenv("FLUFFY_IN_L1") == "1", Require: getenv(sandbox.EnvRequireJail) != ""}, bin, log)
	if err != nil {
		return err
	}
	if rep, err := sandbox.Reap(ctx, rtc, runDir, false); err != nil {
		log.Warn("reaping orphaned sandboxes failed", "error", err)
	} else if n := len(rep.Containers) + len(rep.Volumes); n > 0 {
		log.Info("removed sandboxes left by dead kernels", "containers", len(rep.Containers), "volumes", len(rep.Volumes))
	}
	if o.Progress != nil {
		o.Progress("preparing the sandbox image")
	}
	c, err := sandbox.NewContainers(ctx, sandbox.ContainersConfig{Runtime: rtc, Lease: lease, Auditor: o.NetworkAuditor, NetworkPolicy: networkPolicy{e: o.Policy}, Logger: log})
	if err != nil {
		pc.Kill()
		return err
	}
	s.adapter, s.launcher = pc, c
	return nil
}

// pendingLauncher stands in for the docker launcher while startDocker runs
// in the background (Options.SandboxInBackground).
type pendingLauncher struct {
	done     chan struct{} // closed when startDocker returned
	cancel   context.CancelFunc
	launcher supervisor.Launcher // set before done is closed
	adapter  *plugin.Client
	err      error
}

// Prepare waits for the sandbox to be ready, then launches on it.
func (p *pendingLauncher) Prepare(ctx context.Context, spec sandbox.LaunchSpec, cfg *plugin.ClientConfig) (sandbox.Launched, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return sandbox.Launched{}, fmt.Errorf("waiting for the container sandbox to be ready: %w", ctx.Err())
	}
	if p.err != nil {
		return sandbox.Launched{}, p.err
	}
	return p.launcher.Prepare(ctx, spec, cfg)
}

// stop abandons a start still under way and waits for it, so that an
// adapter it launched is known and can be killed.
func (p *pendingLauncher) stop() {
	p.cancel()
	<-p.done
}
