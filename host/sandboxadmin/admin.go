package sandboxadmin

import (
	"context"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/sandbox"
)

// Admin acts on the sandbox resources of one $FLUFFY_HOME.
type Admin struct {
	home   string
	getenv func(string) string
	log    hclog.Logger
}

// New returns the admin of home; getenv is the CLI's environment.
func New(home string, getenv func(string) string, log hclog.Logger) Admin {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return Admin{home: home, getenv: getenv, log: log}
}

// withRuntime runs f with a runtime adapter of its own, under a lease of
// this home's run directory (so the reaper knows it is alive).
func (a Admin) withRuntime(f func(ctx context.Context, rt sandbox.Runtime, runDir string) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runDir := filepath.Join(a.home, "run")
	if err := sandbox.CheckRunDir(runDir); err != nil {
		return err
	}
	bin, err := sandbox.FindAdapter(a.getenv)
	if err != nil {
		return sandbox.ErrEngineUnreachable(err)
	}
	lease, err := sandbox.AcquireLease(runDir, sandbox.NewKernelID())
	if err != nil {
		return err
	}
	defer lease.Release()
	pc, rt, err := sandbox.LaunchAdapter(ctx, &sandbox.AdapterJail{Lease: lease, EngineSocket: sandbox.EngineSocketFromEnv(a.getenv), Logger: a.log, Require: a.getenv(sandbox.EnvRequireJail) != ""}, bin, a.log)
	if err != nil {
		return err
	}
	defer pc.Kill()
	if _, err := sandbox.RequireEngine(ctx, rt); err != nil {
		return err
	}
	return f(ctx, rt, runDir)
}

// Inventory lists the engine's sandbox resources (this home's and
// others', which are never touched from here).
func (a Admin) Inventory() ([]sandbox.Resource, error) {
	var inv []sandbox.Resource
	err := a.withRuntime(func(ctx context.Context, rt sandbox.Runtime, runDir string) error {
		var err error
		inv, err = sandbox.Inventory(ctx, rt, runDir)
		return err
	})
	return inv, err
}

// Reap removes this home's orphaned sandbox resources (with all, also
// those of its running kernels). The report is nil when the runtime did
// not start; else it says what was removed, even on an error.
func (a Admin) Reap(all bool) (*sandbox.ReapReport, error) {
	var rep *sandbox.ReapReport
	err := a.withRuntime(func(ctx context.Context, rt sandbox.Runtime, runDir string) error {
		r, err := sandbox.Reap(ctx, rt, runDir, all)
		rep = &r
		return err
	})
	return rep, err
}

// EngineSocket is the container engine's socket the environment names.
func EngineSocket(getenv func(string) string) string { return sandbox.EngineSocketFromEnv(getenv) }

// ErrEngineUnreachable says the engine does not answer, and how to fix it.
func ErrEngineUnreachable(cause error) error { return sandbox.ErrEngineUnreachable(cause) }

// InstallGuidance says how to install a container engine on goos.
func InstallGuidance(goos string) string { return sandbox.InstallGuidance(goos) }

// BaseImageTar is the L1 image's tarball (an empty rootfs: the kernel is
// the static fluffy binary, bind-mounted).
func BaseImageTar() ([]byte, error) { return sandbox.BaseImageTar() }

// CheckELF refuses a plugin binary the L2 sandbox cannot run (not a
// static ELF for this machine).
func CheckELF(plugin, path string) error { return sandbox.CheckELF(plugin, path) }
