package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/host/registry"
	"github.com/fluffy-waffle/fluffy/manifests"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// newCertifier returns the conformance runner `plugin install` consults.
func newCertifier(e *env) registry.Certifier { return certifier{e: e} }

type certifier struct{ e *env }

// Certify runs core + the plugin's kind profile on the candidate.
func (c certifier) Certify(ctx context.Context, m *manifests.Manifest) (registry.Certification, error) {
	rep, err := certifyRun(ctx, c.e, m.Path, nil, envOr(c.e.getenv, "FLUFFY_SANDBOX", "docker"), 10*time.Second, nil)
	if err != nil {
		return registry.Certification{}, err
	}
	if !rep.Passed() {
		var b bytesBuf
		_ = rep.WriteText(&b)
		fmt.Fprint(c.e.stderr, b.String())
	}
	return rep.Certification(), nil
}

type bytesBuf struct{ b []byte }

func (w *bytesBuf) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
func (w *bytesBuf) String() string              { return string(w.b) }

// certifyRun runs the suite with the CLI's wiring: the L2 launcher when
// the sandbox is docker (required when FLUFFY_REQUIRE_DOCKER=1), and
// fluffy itself as the stub kernel.
func certifyRun(ctx context.Context, e *env, path string, profiles []string, sb string, startTimeout time.Duration, progress func(string)) (*conformance.Report, error) {
	opts := conformance.Options{Logger: e.log, StartTimeout: startTimeout, Progress: progress}
	// The stub kernel is fluffy itself, unless overridden (a test binary
	// must not re-run itself as a kernel).
	if p := e.getenv("FLUFFY_CONFORMANCE_STUB_KERNEL"); p != "" {
		opts.StubKernel = []string{p}
	} else if exe, err := os.Executable(); err == nil && !strings.HasSuffix(exe, ".test") {
		opts.StubKernel = []string{exe, "conformance", "stub-kernel"}
	}
	switch sb {
	case "none":
		opts.SandboxReason = conformance.ReasonNoSandbox + " (sandbox disabled: --sandbox=none)"
	case "docker":
		l2, reason, err := conformance.OpenL2(ctx, e.getenv, e.home, e.log)
		if err != nil {
			return nil, uerr.Wrap(err, "CONFORMANCE_SANDBOX", "the L2 sandbox runtime failed to start", err.Error(), "check `fluffy sandbox ls`, or run with --sandbox=none to skip the sandbox items")
		}
		if l2 == nil {
			if e.getenv(conformance.EnvRequireDocker) == "1" {
				return nil, uerr.New("CONFORMANCE_SANDBOX", "the L2 sandbox runtime is not available", reason, "FLUFFY_REQUIRE_DOCKER=1 is set: install Docker and build the runtime-docker adapter (`make build`)")
			}
			opts.SandboxReason = reason
		} else {
			defer l2.Close()
			opts.Sandbox = l2.Launcher
		}
	default:
		return nil, usageErr("conformance run", fmt.Sprintf("unknown sandbox %q", sb), "use --sandbox=docker or --sandbox=none")
	}
	return conformance.New(opts).Run(ctx, path, profiles)
}
