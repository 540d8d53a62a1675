package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// Error codes of the suite itself (not of the plugin under test).
const (
	CodeUnknownProfile = "CONFORMANCE_UNKNOWN_PROFILE"
	CodeSetup          = "CONFORMANCE_SETUP_FAILED"
)

// ReasonNoSandbox is the skip reason of the sandbox-fitness items when no
// L2 launcher is available.
const ReasonNoSandbox = "L2 sandbox runtime not available"

// Options configure a Runner. Zero values get the defaults noted.
type Options struct {
	Logger hclog.Logger
	// Launcher starts the plugin for every item but the sandbox-fitness
	// ones (default sandbox.Subprocess{}: a plain child process, so hostile
	// behaviour is observable rather than contained).
	Launcher supervisor.Launcher
	// Contained says Launcher is the plugin's L2 sandbox and nothing of the
	// plugin may run any other way: items that would start it outside
	// Launcher (the stub kernel of CORE-SHUTDOWN-002) do not run and say so.
	// `fluffy plugin install` certifies this way.
	Contained bool
	// AdapterLauncher starts runtime-kind plugins. Nil: the runner makes a
	// sandbox.AdapterJail under a private lease with the engine socket of
	// DOCKER_HOST (default /var/run/docker.sock), exactly as the kernel
	// jails its runtime adapter.
	AdapterLauncher supervisor.Launcher
	// Sandbox is the L2 container launcher for the CORE-SANDBOX items. Nil:
	// they skip with SandboxReason (default ReasonNoSandbox).
	Sandbox       supervisor.Launcher
	SandboxReason string
	// StartTimeout bounds a start (default 10 s, the kernel's).
	StartTimeout time.Duration
	// StubKernel is the command line of a throwaway kernel process for
	// CORE-SHUTDOWN-002 (see StubKernelMain). Nil: the item skips.
	StubKernel []string
	// Progress, when set, hears the ID of each item as it starts.
	Progress func(id string)
	// PluginConfig, when set, is a JSON object of Configure settings for
	// a provider plugin under test (e.g. provider-replay's
	// {"builtin_cassette": "conformance"}); the suite's own base_url and
	// api_key override the same keys, and its cassette (ProbeCassette) is
	// added unless PluginConfig has a cassette or builtin_cassette. Other
	// kinds get no configuration from the suite.
	PluginConfig json.RawMessage
}

// Runner runs the suite. It holds no state between runs.
type Runner struct {
	opts Options
}

// New returns a Runner.
func New(opts Options) *Runner {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Launcher == nil {
		opts.Launcher = sandbox.Subprocess{}
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	if opts.SandboxReason == "" {
		opts.SandboxReason = ReasonNoSandbox
	}
	return &Runner{opts: opts}
}

// outcome is what one check returns.
type outcome struct {
	status Status
	msg    string
}

func pass(format string, a ...any) outcome { return outcome{Pass, fmt.Sprintf(format, a...)} }
func fail(format string, a ...any) outcome { return outcome{Fail, fmt.Sprintf(format, a...)} }
func skip(format string, a ...any) outcome { return outcome{Skip, fmt.Sprintf(format, a...)} }
func na(format string, a ...any) outcome   { return outcome{NotApplicable, fmt.Sprintf(format, a...)} }

type checkFunc func(ctx context.Context, p *probe) outcome

// checks maps every catalogue ID to its implementation.
func checks() map[string]checkFunc {
	m := map[string]checkFunc{}
	for _, set := range []map[string]checkFunc{coreChecks(), toolChecks(), providerChecks(), runtimeChecks(), vcsChecks(), policyChecks()} {
		for k, v := range set {
			m[k] = v
		}
	}
	return m
}

// itemTimeout bounds one check; a plugin that hangs fails the item, not the run.
const itemTimeout = 30 * time.Second

// Run certifies the plugin whose manifest is at path (a plugin.yaml or its
// directory) against profiles (default: core plus the plugin's kind). The
// plugin need not be installed: it runs under a private supervisor with a
// temporary workspace and output root, all removed before Run returns. The
// error is for a run that could not happen at all; a plugin's failures are
// in the report.
func (r *Runner) Run(ctx context.Context, path string, profiles []string) (*Report, error) {
	start := time.Now()
	for _, pr := range profiles {
		if !KnownProfile(pr) {
			return nil, uerr.New(CodeUnknownProfile, fmt.Sprintf("unknown conformance profile %q", pr),
				"profiles are core, tool, provider, runtime, vcs and policy", "run `fluffy conformance list` to see them")
		}
	}
	p, err := r.newProbe(path)
	if err != nil {
		return nil, err
	}
	defer p.close()

	rep := &Report{SuiteVersion: SuiteVersion, Manifest: p.manifestPath, Started: start, Sandbox: "subprocess"}
	if r.opts.Sandbox != nil {
		rep.Sandbox = "subprocess + container"
	}
	if r.opts.Contained {
		rep.Sandbox = "container (every item)"
	}
	if a, ok := p.adapterL.(adapterLauncher); ok {
		rep.Sandbox = "adapter jail (bubblewrap)"
		if jailed, why := a.jail.Jailed(); !jailed {
			rep.Sandbox = fmt.Sprintf("adapter subprocess, NOT jailed (%v)", why)
		}
	}
	if p.m != nil {
		rep.Plugin, rep.Version, rep.Kind, rep.SHA256 = p.m.Name, p.m.Version, p.m.Kind, p.m.SHA256
		if sum, err := manifests.FileSHA256(p.m.EntryPath()); err == nil {
			rep.SHA256 = sum
		}
	}
	if len(profiles) == 0 {
		kind := ""
		if p.m != nil {
			kind = p.m.Kind
		}
		profiles = ProfilesFor(kind)
	}
	rep.Profiles = profiles

	impl := checks()
	for _, it := range Catalogue() {
		if !slices.Contains(profiles, it.Profile) {
			continue
		}
		if r.opts.Progress != nil {
			r.opts.Progress(it.ID)
		}
		t0 := time.Now()
		var o outcome
		switch {
		case p.m != nil && !appliesToAny(it, p.m.APIVersions):
			o = na("applies to API versions %v; the plugin declares %v", it.APIVersions, p.m.APIVersions)
		case impl[it.ID] == nil:
			o = skip("not implemented by this suite version")
		default:
			cctx, cancel := context.WithTimeout(ctx, itemTimeout)
			o = safeRun(cctx, impl[it.ID], p)
			cancel()
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("conformance run of %s: %w", path, ctx.Err())
		}
		rep.Results = append(rep.Results, Result{Item: it, Status: o.status, Message: o.msg, Duration: time.Since(t0)})
	}
	rep.APIVersion = p.negotiated
	rep.Duration = time.Since(start)
	return rep, nil
}

func appliesToAny(it Item, vs []int) bool {
	if len(it.APIVersions) == 0 {
		return true
	}
	for _, v := range vs {
		if it.AppliesTo(v) {
			return true
		}
	}
	return false
}

// safeRun turns a panic in a check (a suite bug) into a failed item rather
// than a crashed run.
func safeRun(ctx context.Context, f checkFunc, p *probe) (o outcome) {
	defer func() {
		if v := recover(); v != nil {
			o = fail("the conformance suite itself failed on this item (%v); please report it", v)
		}
	}()
	return f(ctx, p)
}

// newProbe loads the manifest and prepares the temporary directories.
func (r *Runner) newProbe(path string) (*probe, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		abs = filepath.Join(abs, manifests.FileName)
	} else if err != nil {
		return nil, uerr.Wrap(err, CodeSetup, fmt.Sprintf("cannot read %s", path), err.Error(), "pass the plugin's directory or its plugin.yaml")
	}
	dir, err := os.MkdirTemp("", "fluffy-conformance-")
	if err != nil {
		return nil, uerr.Wrap(err, CodeSetup, "cannot create a temporary directory for the run", err.Error(), "check $TMPDIR")
	}
	p := &probe{r: r, manifestPath: abs, dir: dir}
	p.m, p.loadErr = manifests.Load(abs)
	if p.loadErr != nil {
		p.m = nil
	} else {
		p.sumErr = p.m.VerifyChecksum()
	}
	if err := p.setupDirs(); err != nil {
		p.close()
		return nil, uerr.Wrap(err, CodeSetup, "cannot prepare the scratch workspace", err.Error(), "check $TMPDIR has space")
	}
	if p.m != nil {
		switch p.m.Kind {
		case manifests.KindProvider:
			if err := p.setupProvider(); err != nil {
				p.close()
				return nil, uerr.Wrap(err, CodeSetup, "cannot start the CONNECT proxy for the provider under test", err.Error(), "check $TMPDIR is writable")
			}
		case manifests.KindRuntime:
			if err := p.setupRuntime(); err != nil {
				p.close()
				return nil, uerr.Wrap(err, CodeSetup, "cannot prepare the runtime adapter jail", err.Error(), "check $TMPDIR is writable")
			}
		case manifests.KindVCS:
			if err := p.setupVCS(); err != nil {
				p.close()
				return nil, uerr.Wrap(err, CodeSetup, "cannot prepare the scratch git repository", err.Error(), "check that git works on this machine")
			}
		}
	}
	return p, nil
}

// newSupervisor builds a private supervisor around launcher, with the
// plugin added (nil when the manifest is unusable).
func (p *probe) newSupervisor(l supervisor.Launcher, outRoot string) (*supervisor.Supervisor, error) {
	sup := supervisor.New(supervisor.Options{
		Logger:           p.r.opts.Logger.Named("conformance"),
		Launcher:         l,
		StartTimeout:     p.r.opts.StartTimeout,
		CallTimeout:      20 * time.Second,
		HealthTimeout:    2 * time.Second,
		KernelID:         "conformance-" + filepath.Base(p.dir),
		SessionID:        "conformance",
		Workspace:        p.ws,
		OutRoot:          outRoot,
		BreakerThreshold: 1 << 20,
		RestartBackoff:   func() backoff.BackOff { return &backoff.ZeroBackOff{} },
	})
	if err := sup.Add(p.spec()); err != nil {
		sup.Close()
		return nil, err
	}
	return sup, nil
}

func (p *probe) spec() supervisor.Spec {
	s := registry.Spec(p.m)
	s.ConfigJSON = p.configJSON
	// As the kernel does, the proxy also allows the configured base URL's
	// host: here the fake upstream.
	for _, hp := range p.network {
		if !slices.Contains(s.Network, hp) {
			s.Network = append(slices.Clone(s.Network), hp)
		}
	}
	// registry.Spec sets the template's timeout as the call deadline (the
	// kernel kills a policy extension at 100 ms). The suite measures
	// latency itself (POLICY-LATENCY-001), so a slow plugin fails that one
	// item instead of every call being killed: only a deadline the manifest
	// sets itself applies here, else the runner's CallTimeout.
	s.Limits.Timeout = p.m.Sandbox.Timeout
	return s
}

// blocked explains why an item that needs a running plugin cannot run.
func (p *probe) blocked() (outcome, bool) {
	if p.m == nil {
		return skip("the manifest is unusable (see CORE-MANIFEST-001)"), true
	}
	if p.sumErr != nil {
		return skip("the binary does not match its checksum (see CORE-MANIFEST-002)"), true
	}
	if err := supervisor.CheckAPIVersions(p.m.Name, p.m.APIVersions); err != nil {
		return skip("no API version in common with the kernel (see CORE-MANIFEST-003)"), true
	}
	if err := p.ensureStarted(); err != nil {
		return skip("the plugin did not start (%s): see the CORE item that failed", uerr.From(err).Code), true
	}
	return outcome{}, false
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	var ue *uerr.Error
	if errors.As(err, &ue) {
		s := ue.Code + ": " + ue.What
		if ue.Why != "" {
			s += " — " + ue.Why
		}
		return s
	}
	return strings.TrimSpace(err.Error())
}
