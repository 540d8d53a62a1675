package conformance

import (
	"context"
	"errors"
	"os"
	"sync"

	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// engineViewer is a launcher that can also show the engine's own record of
// containers: the L2 launcher OpenL2 returns, through the runtime-docker
// adapter it started.
type engineViewer interface{ EngineView() rt.Client }

// engineView is the suite's own view of the container engine: what the
// engine records about a container, read through fluffy's builtin
// runtime-docker adapter (the Docker client lives only there, as DESIGN
// keeps it), never through the adapter under test. It is the L2
// launcher's adapter when the run has one, else a builtin adapter the
// probe starts in its jail (closed with the probe). (nil, reason, nil)
// when there is no builtin adapter to start.
func (p *probe) engineView(ctx context.Context) (rt.Client, string, error) {
	if v, ok := p.r.opts.Sandbox.(engineViewer); ok && v.EngineView() != nil {
		return v.EngineView(), "", nil
	}
	p.engOnce.Do(func() { p.eng, p.engSkip, p.engErr = p.startEngineView(ctx) })
	return p.eng, p.engSkip, p.engErr
}

type engineState struct {
	engOnce sync.Once
	eng     rt.Client
	engSkip string
	engErr  error
}

func (p *probe) startEngineView(ctx context.Context) (rt.Client, string, error) {
	bin, err := sandbox.FindAdapter(os.Getenv)
	if err != nil {
		return nil, "the suite reads the engine's own record through fluffy's builtin runtime-docker adapter, which was not found: " + err.Error(), nil
	}
	runDir, err := os.MkdirTemp("", "fce-")
	if err != nil {
		return nil, "", err
	}
	lease, err := sandbox.AcquireLease(runDir, sandbox.NewKernelID())
	if err != nil {
		_ = os.RemoveAll(runDir)
		return nil, "", err
	}
	log := p.r.opts.Logger.Named("engine-view")
	pc, c, err := sandbox.LaunchAdapter(ctx, &sandbox.AdapterJail{Lease: lease, EngineSocket: sandbox.EngineSocketFromEnv(os.Getenv),
		Logger: log, Require: os.Getenv(sandbox.EnvRequireJail) != ""}, bin, log)
	if err != nil {
		_ = lease.Release()
		_ = os.RemoveAll(runDir)
		return nil, "", errors.Join(errors.New("start fluffy's runtime-docker adapter as the suite's engine view"), err)
	}
	p.onClose(func() { pc.Kill(); _ = lease.Release(); _ = os.RemoveAll(runDir) })
	return c, "", nil
}
