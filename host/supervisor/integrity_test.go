package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// evilCopy writes the fixture's bytes plus a trailer: a binary that runs
// exactly like the fixture but is not the one approved.
func evilCopy(t *testing.T, good string) (string, string) {
	t.Helper()
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "evil")
	if err := os.WriteFile(p, append(b, []byte("\x00evil trailer")...), 0o755); err != nil {
		t.Fatal(err)
	}
	return p, fileSum(t, p)
}

// runningSum hashes the executable of the running instance of name, as the
// kernel sees it through /proc: the bytes that actually run.
func runningSum(t *testing.T, s *Supervisor, name string) string {
	t.Helper()
	s.mu.Lock()
	m := s.plugins[name]
	s.mu.Unlock()
	m.mu.Lock()
	inst := m.inst
	m.mu.Unlock()
	if inst == nil {
		t.Fatal("no running instance")
	}
	rc := inst.client.ReattachConfig()
	if rc == nil || rc.Pid == 0 {
		t.Fatal("no pid for the instance")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/exe", rc.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestSwappedBinaryRefused: a store binary replaced after the
// plugin was added is refused at start, and its bytes never run.
func TestSwappedBinaryRefused(t *testing.T) {
	h := newHarness(t, nil)
	spec := fixtureSpec(t, "good", []int{1, 2})
	evil, _ := evilCopy(t, spec.Binary)
	if err := h.sup.Add(spec); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(evil, spec.Binary); err != nil {
		t.Fatal(err)
	}
	_, err := echo(t, h.sup, "fixture")
	if !uerr.HasCode(err, CodeChecksum) {
		t.Fatalf("got %v, want %s", err, CodeChecksum)
	}
	if _, statErr := os.Stat(filepath.Join(h.workspace, "started-good")); statErr == nil {
		t.Fatal("the swapped binary was executed")
	}
}

// TestLaunchedBytesAreTheVerifiedOnes: while the store binary
// is swapped every 2 ms between the approved bytes and others, 20 launches
// either refuse or run exactly the approved bytes; on the old code (hash,
// then exec the store path) some launches ran the swapped-in binary.
func TestLaunchedBytesAreTheVerifiedOnes(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.BreakerThreshold = 1000 })
	spec := fixtureSpec(t, "good", []int{1, 2})
	good, err := os.ReadFile(spec.Binary)
	if err != nil {
		t.Fatal(err)
	}
	evilPath, _ := evilCopy(t, spec.Binary)
	evil, _ := os.ReadFile(evilPath)
	if err := h.sup.Add(spec); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tmp := spec.Binary + ".swap"
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			data := good
			if i%2 == 0 {
				data = evil
			}
			if err := os.WriteFile(tmp, data, 0o755); err == nil {
				_ = os.Rename(tmp, spec.Binary)
			}
		}
	}()
	var ran, refused int
	for i := 0; i < 20; i++ {
		err := h.sup.Restart(context.Background(), "fixture")
		switch {
		case err == nil:
			ran++
			if got := runningSum(t, h.sup, "fixture"); got != spec.SHA256 {
				close(stop)
				wg.Wait()
				t.Fatalf("launch %d ran %s, not the verified %s", i, got, spec.SHA256)
			}
		case uerr.HasCode(err, CodeChecksum):
			refused++
		default:
			close(stop)
			wg.Wait()
			t.Fatalf("launch %d: %v", i, err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d launches ran the verified bytes, %d were refused", ran, refused)
	if ran == 0 {
		t.Fatal("no launch ran at all: the test proved nothing")
	}
}

// wrapper launches like sandbox.Bwrap does: cfg.Cmd is a wrapper program
// (here /bin/sh) that then execs the plugin binary it was given.
type wrapper struct{ inner sandbox.Subprocess }

func (w wrapper) Prepare(ctx context.Context, spec sandbox.LaunchSpec, cfg *plugin.ClientConfig) (sandbox.Launched, error) {
	l, err := w.inner.Prepare(ctx, spec, cfg)
	if err != nil {
		return l, err
	}
	cmd := exec.Command("/bin/sh", "-c", `exec "$0"`, spec.Binary) // the default personality
	cmd.Dir, cmd.Env = cfg.Cmd.Dir, cfg.Cmd.Env
	cfg.Cmd = cmd
	return l, nil
}

// TestWrapperLauncherIsNotHashed: a launcher that starts the
// plugin through a wrapper (bwrap) owns its checksum contract; on the old
// code go-plugin's SecureConfig hashed the wrapper against the plugin's
// sum and every plugin was refused under --sandbox=bwrap.
func TestWrapperLauncherIsNotHashed(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Launcher = wrapper{} })
	spec := fixtureSpec(t, "good", []int{1, 2})
	if err := h.sup.Add(spec); err != nil {
		t.Fatal(err)
	}
	if _, err := echo(t, h.sup, "fixture"); err != nil {
		t.Fatalf("a plugin behind a wrapper: %v", err)
	}
	if got := runningSum(t, h.sup, "fixture"); got != spec.SHA256 {
		t.Fatalf("ran %s, want %s", got, spec.SHA256)
	}
}

// BenchmarkStart is plugin start to ready (tool-fs, plain subprocess) with
// the binary store: "cached" restarts under one kernel (the copy verified
// once, then two stats per start), "cold" a new kernel every start (copy
// while hashing, as the old per-start SecureConfig hash did).
func BenchmarkStart(b *testing.B) {
	bin := filepath.Join(binDir, "tool-fs")
	sum := fileSum(b, bin)
	spec := Spec{Name: "tool-fs", Version: "0.1.0", Kind: "tool", Binary: bin, SHA256: sum, APIVersions: []int{1, 2}}
	ws := b.TempDir()
	b.Run("cached", func(b *testing.B) {
		store, err := sandbox.OpenBinaryStore(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		sup := New(Options{Workspace: ws, OutRoot: b.TempDir(), Binaries: store})
		defer sup.Close()
		if err := sup.Add(spec); err != nil {
			b.Fatal(err)
		}
		if err := sup.Restart(context.Background(), "tool-fs"); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := sup.Restart(context.Background(), "tool-fs"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			store, err := sandbox.OpenBinaryStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			sup := New(Options{Workspace: ws, OutRoot: b.TempDir(), Binaries: store})
			if err := sup.Add(spec); err != nil {
				b.Fatal(err)
			}
			if err := sup.Restart(context.Background(), "tool-fs"); err != nil {
				b.Fatal(err)
			}
			sup.Close()
		}
	})
}
