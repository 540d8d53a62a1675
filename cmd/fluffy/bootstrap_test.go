package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/internal/testbin"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// fluffyLayout lays out fluffy the way `make build` does: bin/fluffy with
// bin/plugins/<name>/ beside it (binary + stamped plugin.yaml).
func fluffyLayout(t *testing.T, extra ...string) string {
	t.Helper()
	root, err := os.MkdirTemp("", "fl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	_ = os.Chmod(root, 0o755)
	bin := filepath.Join(root, "fluffy")
	b, err := os.ReadFile(testbin.Build(t, "cmd/fluffy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range append([]string{"runtime-docker", "tool-fs"}, extra...) {
		src := buildPlugin(t, "../../builtin-plugins/"+p, "../../builtin-plugins/"+p+"/plugin.yaml")
		dst := filepath.Join(root, "plugins", p)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{p, "plugin.yaml"} {
			data, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, f), data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return bin
}

func needDockerCLI(t *testing.T) {
	t.Helper()
	if err := exec.Command("docker", "info").Run(); err != nil {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("FLUFFY_REQUIRE_DOCKER is set but docker does not answer: %v", err)
		}
		t.Skipf("Docker is not available: %v", err)
	}
}

func shortHome(t *testing.T) string {
	t.Helper()
	h, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(h, 0o755)
	t.Cleanup(func() { os.RemoveAll(h) })
	return h
}

// killKernel kills the project's kernel the hard way: the local process by
// its lock-file pid, or the L1 container.
func killKernel(t *testing.T, b *bootstrap) {
	t.Helper()
	if b.l1 {
		out, err := exec.Command("docker", "ps", "-q", "--filter", "label=io.fluffy.project="+b.project).Output()
		ids := strings.Fields(string(out))
		if err != nil || len(ids) != 1 {
			t.Fatalf("L1 containers of the project: %q %v", out, err)
		}
		if out, err := exec.Command("docker", "kill", ids[0]).CombinedOutput(); err != nil {
			t.Fatalf("docker kill: %v %s", err, out)
		}
		return
	}
	pidb, err := os.ReadFile(b.paths.Lock)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidb)))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill kernel %d: %v", pid, err)
	}
}

// TestBootstrapRestartsKernelThreeTimesThenGivesUp: the kernel SIGKILLed
// three times is restarted each time (and answers again); the fourth time
// the bootstrap stops with KERNEL_RESTART_LIMIT and nothing is left behind.
func TestBootstrapRestartsKernelThreeTimesThenGivesUp(t *testing.T) {
	needDockerCLI(t)
	exe := fluffyLayout(t)
	for _, l1 := range []bool{false, true} {
		t.Run(map[bool]string{false: "local", true: "L1"}[l1], func(t *testing.T) {
			home := shortHome(t)
			project := t.TempDir()
			t.Setenv("FLUFFY_SANDBOX", "none") // the kernel itself is under test, not L2
			e := &env{stdout: os.Stdout, stderr: os.Stderr, home: home, getenv: os.Getenv, log: nil}
			b := newBootstrap(e, project, l1, func(s string) { t.Log(s) })
			b.exe = exe
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			cl, err := b.connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res, err := cl.Call(ctx, "kernel.status", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var st map[string]any
			_ = json.Unmarshal(res, &st)
			if st["l1"] != l1 || st["project"] != project {
				t.Fatalf("status = %v", st)
			}
			// A second client attaches to the same kernel instead of starting one.
			b2 := newBootstrap(e, project, l1, nil)
			b2.exe = exe
			cl2, err := b2.connect(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res2, _ := cl2.Call(ctx, "kernel.status", nil, nil)
			var st2 map[string]any
			_ = json.Unmarshal(res2, &st2)
			if st2["pid"] != st["pid"] || b2.started != 0 {
				t.Fatalf("second fluffy started another kernel: %v vs %v", st2["pid"], st["pid"])
			}
			cl2.Close()

			var reconnects atomic.Int32
			done := make(chan error, 1)
			go func() {
				done <- b.supervise(ctx, cl, 200*time.Millisecond, func(n *ipc.Client) {
					if _, err := n.Ping(ctx); err == nil {
						reconnects.Add(1)
					}
				})
			}()
			for i := 1; i <= 4; i++ {
				killKernel(t, b)
				if i == 4 {
					break
				}
				deadline := time.Now().Add(90 * time.Second)
				for reconnects.Load() < int32(i) {
					if time.Now().After(deadline) {
						t.Fatalf("kernel not restarted after kill %d", i)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
			select {
			case err := <-done:
				if !uerr.HasCode(err, "KERNEL_RESTART_LIMIT") {
					t.Fatalf("after the 4th crash: %v", err)
				}
			case <-time.After(90 * time.Second):
				t.Fatal("bootstrap did not give up after the 4th crash")
			}
			if _, err := os.Stat(b.paths.Socket); !os.IsNotExist(err) {
				pidb, _ := os.ReadFile(b.paths.Lock)
				ps, _ := exec.Command("ps", "-ef").Output()
				t.Fatalf("socket left behind: %v (lock free %v, pid %s)\n%s", err, lockFree(b.paths.Lock), pidb, ps)
			}
			if l1 {
				out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=io.fluffy.project="+project).Output()
				if len(strings.TrimSpace(string(out))) != 0 {
					t.Fatalf("L1 containers left behind: %s", out)
				}
			}
		})
	}
}

// TestBootstrapSaysWhyALocalKernelDidNotStart: a local kernel that exits
// at once with a structured error (here a project whose .fluffy/db is a
// file) gives the user that error, its code and fix, instead of a
// readiness timeout a minute later that hides it in a log excerpt.
func TestBootstrapSaysWhyALocalKernelDidNotStart(t *testing.T) {
	exe := fluffyLayout(t)
	home := shortHome(t)
	project := t.TempDir()
	if err := os.MkdirAll(filepath.Join(project, ".fluffy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, ".fluffy", "db"), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An earlier kernel's error in the log is not this one's.
	if err := os.MkdirAll(filepath.Join(home, "k"), 0o700); err != nil {
		t.Fatal(err)
	}
	e := &env{stdout: os.Stdout, stderr: os.Stderr, home: home, getenv: os.Getenv, log: nil}
	b := newBootstrap(e, project, false, nil)
	b.exe = exe
	if err := os.WriteFile(b.paths.Log, []byte("ERROR: an older failure\nReason: old\nFix: old\nCode: OLD_FAILURE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := b.connect(ctx)
	ue, ok := uerr.As(err)
	if !ok || ue.Code != "FS_PATH_INVALID" || !strings.Contains(ue.What, "not a directory") || ue.Fix == "" {
		t.Fatalf("connect = %v; want the kernel's own FS_PATH_INVALID error", err)
	}
}
