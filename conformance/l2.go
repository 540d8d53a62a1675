package conformance

import (
	"context"
	"os"
	"os/exec"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// L2 is the container launcher a run uses for its sandbox-fitness items,
// with everything it started.
type L2 struct {
	Launcher supervisor.Launcher
	close    func()
}

// Close stops the runtime adapter and releases the lease.
func (l *L2) Close() {
	if l != nil && l.close != nil {
		l.close()
	}
}

// OpenL2 starts the L2 container machinery the way the kernel does (the
// runtime-docker adapter in its jail, a lease under a short private run
// directory, the base image). The adapter comes only from fluffy's builtins
// (sandbox.FindAdapter), never from a plugin store or PATH. It returns (nil, reason, nil) when Docker or the
// adapter is absent, and an error when something present fails.
func OpenL2(ctx context.Context, getenv func(string) string, log hclog.Logger) (*L2, string, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if _, err := exec.LookPath("docker"); err != nil {
		if _, err := os.Stat(sandbox.EngineSocketFromEnv(getenv)); err != nil {
			return nil, ReasonNoSandbox + " (no Docker engine socket)", nil
		}
	}
	bin, err := sandbox.FindAdapter(getenv)
	if err != nil {
		return nil, ReasonNoSandbox + " (" + err.Error() + ")", nil
	}
	runDir, err := os.MkdirTemp("", "fcf-")
	if err != nil {
		return nil, "", err
	}
	lease, err := sandbox.AcquireLease(runDir, sandbox.NewKernelID())
	if err != nil {
		_ = os.RemoveAll(runDir)
		return nil, "", err
	}
	cleanup := func() { _ = lease.Release(); _ = os.RemoveAll(runDir) }
	pc, rtc, err := sandbox.LaunchAdapter(ctx, &sandbox.AdapterJail{Lease: lease, EngineSocket: sandbox.EngineSocketFromEnv(getenv), Logger: log, Require: getenv(sandbox.EnvRequireJail) != ""}, bin, log)
	if err != nil {
		cleanup()
		return nil, "", err
	}
	hub := &netHub{}
	c, err := sandbox.NewContainers(ctx, sandbox.ContainersConfig{Runtime: rtc, Lease: lease, Logger: log, Auditor: hub})
	if err != nil {
		pc.Kill()
		cleanup()
		return nil, "", err
	}
	// The proxy of every ai-provider container reports to hub, so the
	// provider profile sees each tunnel its plugin opens.
	return &L2{Launcher: l2Launcher{Containers: c, hub: hub, engine: rtc}, close: func() { pc.Kill(); cleanup() }}, "", nil
}
