package kerneltest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// Conformance builds the builtin plugin pkg (repository-relative), stages
// it with its stamped plugin.yaml and runs the conformance suite on it the
// way a third-party author's plugintest.Conformance does: behavioural items
// as a plain process behind the kernel's CONNECT proxy, the sandbox items
// in its L2 container (runtime-docker built from this checkout), the stub
// kernel for CORE-SHUTDOWN-002. Without a Docker engine it skips, unless
// FLUFFY_REQUIRE_DOCKER is set. It returns the report; the caller judges it.
func Conformance(tb testing.TB, pkg string, profiles ...string) *conformance.Report {
	tb.Helper()
	return ConformanceConfig(tb, pkg, nil, profiles...)
}

// ConformanceConfig is Conformance with Configure settings for a provider
// under test (conformance.Options.PluginConfig, `fluffy conformance run
// --config`).
func ConformanceConfig(tb testing.TB, pkg string, config json.RawMessage, profiles ...string) *conformance.Report {
	tb.Helper()
	if _, err := os.Stat(sandbox.EngineSocketFromEnv(os.Getenv)); err != nil {
		if os.Getenv(conformance.EnvRequireDocker) == "" {
			tb.Skipf("no Docker engine (%v): the sandbox items cannot run", err)
		}
		tb.Fatalf("FLUFFY_REQUIRE_DOCKER is set but there is no Docker engine: %v", err)
	}
	dir := Stage(tb, pkg)
	adapter := Build(tb, "builtin-plugins/runtime-docker")
	stub := Build(tb, "conformance/cmd/stubkernel")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	getenv := func(k string) string {
		if k == "FLUFFY_RUNTIME_ADAPTER" {
			return adapter
		}
		return os.Getenv(k)
	}
	l2, reason, err := conformance.OpenL2(ctx, getenv, nil)
	if err != nil {
		tb.Fatalf("the L2 sandbox failed to start: %v", err)
	}
	if l2 == nil {
		tb.Fatalf("the L2 sandbox is not available: %s", reason)
	}
	defer l2.Close()
	rep, err := conformance.New(conformance.Options{Sandbox: l2.Launcher, StubKernel: []string{stub}, PluginConfig: config}).Run(ctx, dir, profiles)
	if err != nil {
		tb.Fatal(err)
	}
	var b bytes.Buffer
	_ = rep.WriteText(&b)
	tb.Logf("%s", b.String())
	return rep
}
