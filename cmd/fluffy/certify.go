package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
)

// newCertifier returns the conformance runner `plugin install` consults:
// every item runs in the plugin's L2 sandbox (sb "docker"), or as a plain
// process only when the user said so (sb "none").
func newCertifier(e *env, sb string) registry.Certifier { return certifier{e: e, sb: sb} }

type certifier struct {
	e  *env
	sb string
}

// Certify runs core + the plugin's kind profile on the candidate.
func (c certifier) Certify(ctx context.Context, m *manifests.Manifest) (registry.Certification, error) {
	rep, err := certifyRun(ctx, c.e, m.Path, nil, c.sb, 10*time.Second, nil, nil)
	if err != nil {
		return registry.Certification{}, err
	}
	if !rep.Passed() {
		var b bytesBuf
		_ = rep.WriteText(&b)
		fmt.Fprint(c.e.stderr, b.String())
	}
	return conformance.Certification(rep), nil
}

type bytesBuf struct{ b []byte }

func (w *bytesBuf) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *bytesBuf) String() string              { return string(w.b) }

// certifyRun runs the suite with the CLI's wiring. With sb "docker" every
// item runs in the plugin's L2 container (the stub-kernel item, which would
// start it as a plain process, does not run); when the container runtime is
// unavailable it refuses rather than run the plugin unsandboxed. sb "none"
// runs the plugin as a plain process with the user's privileges, with
// fluffy itself as the stub kernel: the user chose that explicitly.
func certifyRun(ctx context.Context, e *env, path string, profiles []string, sb string, startTimeout time.Duration, pluginConfig json.RawMessage, progress func(string)) (*conformance.Report, error) {
	opts := conformance.Options{Logger: e.log, StartTimeout: startTimeout, Progress: progress, PluginConfig: pluginConfig}
	switch sb {
	case "none":
		fmt.Fprintln(e.stderr, "WARNING: --sandbox=none: the plugin under test runs as a plain process with your privileges (your files, your environment, your network)")
		opts.SandboxReason = conformance.ReasonNoSandbox + " (sandbox disabled: --sandbox=none)"
		// The stub kernel is fluffy itself, unless overridden (a test binary
		// must not re-run itself as a kernel).
		if p := e.getenv("FLUFFY_CONFORMANCE_STUB_KERNEL"); p != "" {
			opts.StubKernel = []string{p}
		} else if exe, err := os.Executable(); err == nil && !strings.HasSuffix(exe, ".test") {
			opts.StubKernel = []string{exe, "conformance", "stub-kernel"}
		}
	case "docker":
		l2, reason, err := conformance.OpenL2(ctx, e.getenv, e.log)
		if err != nil {
			return nil, uerr.Wrap(err, "CONFORMANCE_SANDBOX", "the L2 sandbox runtime failed to start", err.Error(),
				"check `fluffy sandbox ls`; or pass --sandbox=none to run the plugin under test as a plain process with your privileges")
		}
		if l2 == nil {
			return nil, uerr.New("CONFORMANCE_SANDBOX", "cannot certify the plugin in its sandbox: the L2 sandbox runtime is not available", reason+"; certification runs the plugin's code, so it runs only in its sandbox",
				"install Docker and build the runtime-docker adapter (`make build`); or pass --sandbox=none to run the plugin as a plain process with your privileges")
		}
		defer l2.Close()
		opts.Launcher, opts.Sandbox, opts.Contained = l2.Launcher, l2.Launcher, true
	default:
		return nil, usageErr("conformance run", fmt.Sprintf("unknown sandbox %q", sb), "use --sandbox=docker or --sandbox=none")
	}
	return conformance.New(opts).Run(ctx, path, profiles)
}
