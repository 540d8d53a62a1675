package sandbox

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// Runtime is the container engine as the sandbox package uses it. A
// runtime plugin's client (plugins/runtime.Client) implements it.
type Runtime interface {
	Ping(ctx context.Context) (rt.PingInfo, error)
	PrepareImage(ctx context.Context, ref string, rootfsTar []byte, labels map[string]string) (bool, error)
	Create(ctx context.Context, spec rt.Spec) (string, error)
	Attach(ctx context.Context, id string, attached func(), out rt.OutputFunc) error
	Start(ctx context.Context, id string) error
	Stop(ctx context.Context, id string, timeout time.Duration) error
	Kill(ctx context.Context, id string, signal string) error
	Remove(ctx context.Context, id string, force, volumes bool) error
	Inspect(ctx context.Context, id string) (rt.State, bool, error)
	Wait(ctx context.Context, id string) (rt.Exit, error)
	Logs(ctx context.Context, id string, follow bool, tail int64, out rt.OutputFunc) error
	List(ctx context.Context, labels map[string]string, all bool) ([]rt.State, error)
	CreateVolume(ctx context.Context, name string, labels map[string]string) (rt.Volume, error)
	RemoveVolume(ctx context.Context, name string, force bool) error
	ListVolumes(ctx context.Context, labels map[string]string) ([]rt.Volume, error)
}

// InstallGuidance is the per-platform install advice for a missing
// container engine.
func InstallGuidance(goos string) string {
	switch goos {
	case "linux":
		return "install and start Docker: `sudo apt install docker.io && sudo systemctl start docker` (Debian/Ubuntu) or `sudo dnf install moby-engine && sudo systemctl start docker` (Fedora); or set `sandbox: bwrap` (`fluffy config set sandbox bwrap`) to use bubblewrap without a daemon"
	case "darwin":
		return "install Docker Desktop: `brew install --cask docker`, then start it once from Applications"
	case "windows":
		return "set up WSL2 (`wsl --install`), install Docker Desktop with the WSL2 backend, and run fluffy inside WSL2; native Windows containers are not supported"
	default:
		return "install Docker for your platform and make sure its socket answers"
	}
}

// ErrEngineUnreachable builds the structured error fluffy exits with when no
// container engine answers.
func ErrEngineUnreachable(cause error) *uerr.Error {
	why := "no container engine answered"
	if cause != nil {
		why = cause.Error()
		if e := uerr.From(cause); e.Why != "" && e.Code == "RUNTIME_UNREACHABLE" {
			why = e.What + ": " + e.Why
		}
	}
	return uerr.Wrap(cause, "RUNTIME_UNREACHABLE",
		"cannot start plugin sandboxes: no container engine",
		why+"; every plugin runs in its own container, so fluffy needs Docker (Podman's Docker-compatible API is not supported)",
		InstallGuidance(runtime.GOOS))
}

// RequireEngine pings the engine and returns its info, or the structured
// RUNTIME_UNREACHABLE error with install guidance.
func RequireEngine(ctx context.Context, r Runtime) (rt.PingInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pi, err := r.Ping(ctx)
	if err != nil {
		return rt.PingInfo{}, ErrEngineUnreachable(err)
	}
	return pi, nil
}

// EnsureBaseImage imports the L2 base image unless the engine has it.
func EnsureBaseImage(ctx context.Context, r Runtime) (string, error) {
	tarball, err := BaseImageTar()
	if err != nil {
		return "", err
	}
	ref := BaseImageRef(tarball)
	if _, err := r.PrepareImage(ctx, ref, tarball, map[string]string{LabelManaged: "1"}); err != nil {
		return "", fmt.Errorf("prepare base image %s: %w", ref, err)
	}
	return ref, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// containerName is unique per instance: the supervisor's instance ids are
// "<plugin>-<random>", so the plugin-name prefix is dropped before the id is
// shortened (otherwise every instance of a plugin with a name of 12 or more
// characters got the same name, and a second one could not start).
func containerName(spec LaunchSpec) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
				return r
			}
			return '-'
		}, s)
	}
	return "fluffy-" + clean(spec.Name) + "-" + clean(shortID(strings.TrimPrefix(spec.InstanceID, spec.Name+"-")))
}
