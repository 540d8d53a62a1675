package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestRunscRuntime runs a plugin under gVisor when the engine has runsc
// registered: the same launcher, chosen per template, with the workspace
// still read-only and the network still absent. .ci/run registers runsc and
// always sets FLUFFY_REQUIRE_RUNSC, so in CI this cannot silently skip; and
// when runsc is registered but cannot run a container (the launch below),
// it fails rather than skips.
func TestRunscRuntime(t *testing.T) {
	needRunsc(t)
	c, err := NewContainers(context.Background(), ContainersConfig{Runtime: tenv.rt, Lease: tenv.lease,
		OCIRuntimes: map[string]string{"code-executor": "runsc"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := newSpec(t, "code-executor")
	spec.Limits.OutBytes = 16 << 20
	r := launch(t, c, spec)
	if got := mustCall(t, r, "echo", map[string]any{"text": "under gvisor"}); got.Data != "under gvisor" {
		t.Fatalf("echo = %+v", got)
	}
	// /out's tmpfs volume under gVisor: an output reaches the host, a
	// write past the limit fails inside and nothing of it reaches the host.
	if got := mustCall(t, r, "write_out", map[string]any{"path": "r.txt", "text": "done"}); !got.OK {
		t.Fatalf("write_out under runsc: %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(spec.OutDir, "op1", "r.txt")); err != nil || string(b) != "done" {
		t.Fatalf("output under runsc: %q %v", b, err)
	}
	defer func() {
		got, err := call(t, r, "fill", map[string]any{"path": GuestOut + "/op1/big", "bytes": 1 << 30}, time.Minute)
		if !strings.Contains(got.Error, "no space left on device") || !uerr.HasCode(err, CodeQuotaExceeded) || apparentSize(spec.OutDir) != 0 {
			t.Fatalf("filling /out under runsc: %+v %v, %d bytes on the host", got, err, apparentSize(spec.OutDir))
		}
	}()
	if got := mustCall(t, r, "write_file", map[string]any{"path": "/workspace/main.go"}); got.OK {
		t.Fatalf("workspace write under runsc succeeded: %+v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(spec.Workspace, "main.go")); string(b) != "package main\n" {
		t.Fatalf("workspace changed under runsc: %q", b)
	}
	if got := mustCall(t, r, "tcp", map[string]any{"addr": "1.1.1.1:443"}); got.OK {
		t.Fatalf("network under runsc: %+v", got)
	}
	// The engine's own record, not ours, says which runtime ran it.
	out, err := exec.Command("docker", "inspect", "-f", "{{.HostConfig.Runtime}}", r.launched.Status().ContainerID).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "runsc" {
		t.Fatalf("container runs under %q, want runsc", got)
	}
}

// needRunsc skips only when the engine does not offer runsc and
// FLUFFY_REQUIRE_RUNSC (set by .ci/run) is unset; with it, it fails.
func needRunsc(t testing.TB) {
	t.Helper()
	needDocker(t)
	pi, err := tenv.rt.Ping(context.Background())
	if err == nil && slices.Contains(pi.Runtimes, "runsc") {
		return
	}
	why := fmt.Sprintf("the engine offers runtimes %v (ping error: %v)", pi.Runtimes, err)
	if os.Getenv("FLUFFY_REQUIRE_RUNSC") != "" {
		t.Fatalf("FLUFFY_REQUIRE_RUNSC is set but runsc is not registered: %s; register it in /etc/docker/daemon.json (see .ci/run)", why)
	}
	t.Skipf("runsc is not registered with the engine: %s", why)
}
