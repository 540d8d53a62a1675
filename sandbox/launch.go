package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/hashicorp/go-plugin"
)

// Limits are the resource limits of one sandbox (templates).
type Limits struct {
	MemoryBytes int64
	CPUs        float64
	Pids        int
	Timeout     time.Duration
	// OutBytes bounds what the plugin may keep in its /out directory (a
	// manifest cannot set it; a launch may lower it).
	OutBytes int64
}

// LaunchSpec is everything a launcher needs to start one plugin instance.
type LaunchSpec struct {
	Name    string
	Version string
	Kind    string
	// Binary is the absolute host path of the plugin's entry binary. The
	// supervisor gives the kernel's verified copy (BinaryStore) and sets
	// Verified; a launcher runs exactly this file (exec or bind mount).
	Binary string
	// Verified: Binary is a BinaryStore copy already checked against
	// SHA256, so the launcher does not hash it again.
	Verified bool
	// EntryName is the entry's file name as installed (a BinaryStore copy
	// is named by its hash): the plugin's argv[0] and its file name under
	// /plugin in a sandbox. Default: Binary's base name.
	EntryName string
	// Template is the L2 template name from the manifest (or its kind default).
	Template string
	Limits   Limits
	// Workspace is the host path of the project; plugins see it read-only.
	Workspace string
	// OutDir is the host path of this instance's output directory.
	OutDir     string
	SessionID  string
	InstanceID string
	// KernelID identifies the running kernel; used to label and reap.
	KernelID string
	// Owner is the kernel's lease owner (its home's run directory id).
	Owner string
	// Network lists host:port pairs a provider may reach through the proxy.
	Network []string
	// Toolchains are host directories mounted read-only at the same path
	// in templates that run code; the kernel fills them (from the policy)
	// only for plugins that declare CapToolchain.
	Toolchains []Toolchain
	// BuildCache is a host directory mounted writable at /cache in
	// templates that run code; the kernel sets it only for core plugins
	// that declare CapBuildCache. Never mounted under gVisor, where the
	// plugin could not keep the code it runs away from it (no Landlock).
	BuildCache string
	// HostGoCache is the host's Go build cache (`go env GOCACHE`),
	// mounted read-only at GuestHostGoCache wherever BuildCache is
	// mounted, never elsewhere; zero: none.
	HostGoCache Toolchain
	// SHA256 is the registry's hash of Binary. Each launcher owns its
	// checksum contract: it runs only a Verified binary or one it hashed
	// itself (checkBinary), and never relies on go-plugin's SecureConfig,
	// which hashes cfg.Cmd.Path (bwrap itself for a jail, nothing for a
	// container's RunnerFunc) and re-reads the file after the check.
	SHA256 string
}

// Launched tells the caller how the plugin sees its mounts and how to undo
// whatever the launcher set up.
type Launched struct {
	// Workspace and OutDir as seen from inside the plugin.
	Workspace string
	OutDir    string
	// Cleanup releases everything the launcher created. It is idempotent and
	// safe to call after the plugin exited.
	Cleanup func()
	// Status reports the sandbox's lifecycle state and, once it ended, how
	// (exit code, OOM kill). Nil for launchers without a sandbox.
	Status func() Status
	// Collect brings what the plugin wrote to its /out onto the host
	// OutDir, for launchers whose /out is not the host directory itself
	// (a size-limited tmpfs in the container). The supervisor calls it
	// after each tool call (a VCS commit is collected by the launcher's
	// own gRPC interceptor); it fails with
	// SANDBOX_QUOTA_EXCEEDED when /out is full. Nil when there is
	// nothing to collect.
	Collect func(ctx context.Context) error
}

// Subprocess launches plugins as plain child processes with an empty
// environment. It is the launcher before (and, with --sandbox=none, instead
// of) L2 containers.
type Subprocess struct{}

// Prepare implements the supervisor's launcher contract.
func (Subprocess) Prepare(_ context.Context, spec LaunchSpec, cfg *plugin.ClientConfig) (Launched, error) {
	if err := checkBinary(spec); err != nil {
		return Launched{}, err
	}
	cmd := exec.Command(spec.Binary)
	cmd.Args[0] = guestName(spec)
	cmd.Dir = spec.Workspace
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "FLUFFY_WORKSPACE=" + spec.Workspace, "FLUFFY_OUT=" + spec.OutDir}
	if tpl, err := LookupTemplate(templateOf(spec)); err == nil && tpl.RunsCode {
		if spec.BuildCache != "" {
			if err := os.MkdirAll(spec.BuildCache, 0o700); err != nil {
				return Launched{}, fmt.Errorf("build cache %s: %w", spec.BuildCache, err)
			}
		}
		// Without a sandbox the host's own toolchains are there anyway;
		// the variables still say where the policy's are.
		cmd.Env = append(cmd.Env, toolchainEnv(spec.Toolchains, spec.BuildCache)...)
		cmd.Env = append(cmd.Env, hostGoCacheEnv(spec, spec.HostGoCache.local())...)
	}
	cfg.Cmd = cmd
	cfg.SkipHostEnv = true
	return Launched{Workspace: spec.Workspace, OutDir: spec.OutDir, Cleanup: func() {}}, nil
}

// templateOf is the spec's template, or its kind's default.
func templateOf(spec LaunchSpec) string {
	if spec.Template != "" {
		return spec.Template
	}
	return DefaultTemplate(spec.Kind)
}
