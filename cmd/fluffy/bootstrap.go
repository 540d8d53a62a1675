package main

// The bootstrap: outside the kernel, it only
// detects the container runtime, starts the project's kernel (in an L1
// container, or as a local process with --l1=none), health-checks it with
// ping/pong, and restarts it at most 3 times in 5 minutes. It parses no
// business data: recovery after a restart is the kernel's job.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/host/kernelapi"
	"github.com/fluffy-waffle/fluffy/host/sandboxadmin"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

const (
	restartLimit  = 3
	restartWindow = 5 * time.Minute
	readyTimeout  = 60 * time.Second
	// superviseInterval is how often a running CLI pings its kernel.
	superviseInterval = 2 * time.Second
)

// l1Flags are the L1 container's fixed security settings (constants, never
// assembled from configuration).
var l1Flags = []string{"--rm", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
	"--tmpfs", "/tmp:rw,nosuid,nodev,size=256m", "--network", "host", "--label", "io.fluffy.l1=1"}

// keyVars pass from the CLI's environment into L1 by name only, so no
// secret appears on a command line.
var keyVars = []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "FLUFFY_LOG_LEVEL", "NO_COLOR"}

type bootstrap struct {
	e        *env
	exe      string // the fluffy binary the kernel runs (default: this one)
	project  string
	l1       bool
	paths    daemon.Paths
	cli      string      // docker or podman
	started  int         // kernels this bootstrap started
	restarts []time.Time // restarts within the window
	l1Name   string      // the L1 container this bootstrap started last
	progress func(string)
	// exited receives once when the local kernel this bootstrap started
	// last ends (nil until one is started).
	exited chan struct{}
	logAt  int64 // the kernel log's size when that kernel started
}

func newBootstrap(e *env, project string, l1 bool, progress func(string)) *bootstrap {
	if progress == nil {
		progress = func(string) {}
	}
	return &bootstrap{e: e, project: project, l1: l1, paths: daemon.PathsFor(e.home, project), progress: progress}
}

// connect attaches to the project's kernel, starting it when none answers.
func (b *bootstrap) connect(ctx context.Context) (*ipc.Client, error) {
	if cl := b.ping(ctx); cl != nil {
		return cl, nil
	}
	// A kernel that holds the project lock but does not answer yet is
	// starting (it answers soon) or exiting (the lock is free soon):
	// starting a second one now would only fail with KERNEL_RUNNING.
	for deadline := time.Now().Add(20 * time.Second); !lockFree(b.paths.Lock) && time.Now().Before(deadline); {
		if cl := b.ping(ctx); cl != nil {
			return cl, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return b.waitReady(ctx)
}

// ping returns a client when a kernel answers on the project's socket.
func (b *bootstrap) ping(ctx context.Context) *ipc.Client {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cl, err := ipc.Dial(cctx, b.paths.Socket, 0)
	if err != nil {
		return nil
	}
	if _, err := cl.Ping(cctx); err != nil {
		cl.Close()
		return nil
	}
	return cl
}

func (b *bootstrap) waitReady(ctx context.Context) (*ipc.Client, error) {
	deadline := time.Now().Add(readyTimeout)
	why := fmt.Sprintf("no answer on %s within %s", b.paths.Socket, readyTimeout)
	for i := 0; time.Now().Before(deadline); i++ {
		if cl := b.ping(ctx); cl != nil {
			return cl, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if b.l1 && i%25 == 24 && !b.l1Running(ctx) {
			why = "its L1 container stopped before the kernel answered"
			break
		}
		if b.exitedEarly() {
			// The kernel said why it could not start: that error is the
			// user's, not a readiness timeout a minute later. One that
			// lost the lock to a kernel another command started just
			// now leaves the answer to that kernel.
			ue := kernelError(b.outputSinceStart())
			if ue != nil && ue.Code == "KERNEL_RUNNING" {
				b.exited = nil
				continue
			}
			if ue != nil {
				return nil, ue
			}
			why = "the kernel exited before it answered"
			break
		}
		// A local kernel answers within a few hundred ms: polling
		// finely at first keeps the poll from adding to the start.
		if i < 100 {
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil, uerr.New("KERNEL_START_FAILED", "the fluffy kernel did not become ready",
		why+"; last kernel output: "+b.kernelOutput(ctx),
		"read the kernel log "+b.paths.Log+", or run `fluffy kernel --project "+b.project+"` in the foreground to see why")
}

// exitedEarly reports whether the local kernel this bootstrap started has
// already ended.
func (b *bootstrap) exitedEarly() bool {
	if b.l1 || b.exited == nil {
		return false
	}
	select {
	case <-b.exited:
		return true
	default:
		return false
	}
}

// outputSinceStart is what the local kernel started last wrote to its
// log (bounded): the log keeps earlier kernels' lines too.
func (b *bootstrap) outputSinceStart() string {
	f, err := os.Open(b.paths.Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(b.logAt, io.SeekStart); err != nil {
		return ""
	}
	out, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	if len(out) > 8<<10 {
		out = out[len(out)-8<<10:]
	}
	return string(out)
}

// kernelError is the last structured error the kernel printed as it
// failed (uerr's rendering: ERROR:, Reason:, Fix:, Code: lines), or nil.
func kernelError(out string) *uerr.Error {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		code, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "Code: ")
		if !ok || code == "" {
			continue
		}
		var what, why, fix string
		for j := i - 1; j >= 0 && j >= i-6; j-- {
			l := strings.TrimSpace(lines[j])
			switch {
			case strings.HasPrefix(l, "Fix: ") && fix == "":
				fix = strings.TrimPrefix(l, "Fix: ")
			case strings.HasPrefix(l, "Reason: ") && why == "":
				why = strings.TrimPrefix(l, "Reason: ")
			case strings.HasPrefix(l, "ERROR: ") && what == "":
				what = strings.TrimPrefix(l, "ERROR: ")
			}
			if what != "" {
				break
			}
		}
		if what == "" {
			return nil
		}
		return uerr.New(code, safeLine(what, 500), safeLine(why, 1000), safeLine(fix, 500))
	}
	return nil
}

// l1Running reports whether the L1 container started last still runs.
func (b *bootstrap) l1Running(ctx context.Context) bool {
	out, err := exec.CommandContext(ctx, b.cli, "inspect", "-f", "{{.State.Running}}", b.l1Name).Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

// kernelOutput is the tail of what the kernel printed: its log file, or
// the L1 container's output.
func (b *bootstrap) kernelOutput(ctx context.Context) string {
	// The kernel appends to its log in both modes (in L1 through --log:
	// the container is removed when it exits); a container that never
	// started the kernel still has its own output.
	tail, _ := os.ReadFile(b.paths.Log)
	if len(tail) == 0 && b.l1 && b.l1Name != "" {
		tail, _ = exec.CommandContext(ctx, b.cli, "logs", "--tail", "30", b.l1Name).CombinedOutput()
	}
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	return strings.TrimSpace(string(tail))
}

// restart is called when the kernel stopped answering: it allows at most
// restartLimit restarts within restartWindow.
func (b *bootstrap) restart(ctx context.Context) (*ipc.Client, error) {
	now := time.Now()
	kept := b.restarts[:0]
	for _, t := range b.restarts {
		if now.Sub(t) < restartWindow {
			kept = append(kept, t)
		}
	}
	b.restarts = kept
	if len(b.restarts) >= restartLimit {
		b.stopOwn()
		return nil, uerr.New("KERNEL_RESTART_LIMIT", "the fluffy kernel keeps crashing",
			fmt.Sprintf("it was restarted %d times within %s and died again", restartLimit, restartWindow),
			"read the kernel log "+b.paths.Log+" and report it; your session is saved, and the next `fluffy` resumes it")
	}
	b.restarts = append(b.restarts, now)
	b.progress(fmt.Sprintf("kernel stopped answering; restarting it (%d of %d)", len(b.restarts), restartLimit))
	b.stopOwn()
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return b.waitReady(ctx)
}

func (b *bootstrap) start(ctx context.Context) error {
	b.started++
	exe := b.exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("locate fluffy: %w", err)
		}
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	if err := os.MkdirAll(filepath.Dir(b.paths.Log), 0o700); err != nil {
		return err
	}
	if !b.l1 {
		b.progress("starting the kernel as a local process (--l1=none)")
		return b.startLocal(exe)
	}
	if err := b.detectRuntime(ctx); err != nil {
		return err
	}
	image, err := b.ensureImage(ctx)
	if err != nil {
		return err
	}
	b.progress("starting the kernel in its L1 container")
	return b.startL1(ctx, exe, image)
}

func (b *bootstrap) startLocal(exe string) error {
	logf, err := os.OpenFile(b.paths.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	b.logAt = 0
	if fi, err := logf.Stat(); err == nil {
		b.logAt = fi.Size()
	}
	cmd := exec.Command(exe, "kernel", "--project", b.project)
	cmd.Env = append(os.Environ(), "FLUFFY_HOME="+b.e.home)
	cmd.Dir = b.project
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this CLI
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start kernel: %w", err)
	}
	// Waited on only to see a kernel that dies before it answers; it
	// outlives this CLI otherwise (its own session).
	exited := make(chan struct{})
	b.exited = exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return nil
}

// detectRuntime finds a container CLI whose engine answers (a
// hard dependency, with per-platform install guidance when missing).
func (b *bootstrap) detectRuntime(ctx context.Context) error {
	var last error
	for _, c := range []string{"docker", "podman"} {
		if _, err := exec.LookPath(c); err != nil {
			last = err
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := exec.CommandContext(cctx, c, "version", "--format", "{{.Server.Version}}").CombinedOutput()
		cancel()
		if err == nil {
			b.cli = c
			return nil
		}
		last = fmt.Errorf("%s: %v: %s", c, err, strings.TrimSpace(string(out)))
	}
	return uerr.Wrap(last, "RUNTIME_UNREACHABLE", "cannot start the fluffy kernel: no container engine",
		fmt.Sprintf("neither docker nor podman answered (%v); the kernel runs in an L1 container", last),
		sandboxadmin.InstallGuidance(runtime.GOOS)+"; or run without L1: fluffy --l1=none")
}

// ensureImage imports the L1 image (an empty rootfs: the kernel is the
// static fluffy binary, bind-mounted) once per content hash. No registry.
func (b *bootstrap) ensureImage(ctx context.Context) (string, error) {
	tarball, err := sandboxadmin.BaseImageTar()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(tarball)
	ref := "fluffy-l1:" + hex.EncodeToString(sum[:])[:12]
	if exec.CommandContext(ctx, b.cli, "image", "inspect", ref).Run() == nil {
		return ref, nil
	}
	b.progress("preparing the L1 image")
	cmd := exec.CommandContext(ctx, b.cli, "import", "--change", "LABEL io.fluffy.l1=1", "-", ref)
	cmd.Stdin = strings.NewReader(string(tarball))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("import L1 image: %v: %s", err, out)
	}
	return ref, nil
}

func (b *bootstrap) containerName() string {
	return "fluffy-l1-" + strings.TrimSuffix(filepath.Base(b.paths.Socket), ".sock")
}

func (b *bootstrap) startL1(ctx context.Context, exe, image string) error {
	sock := sandboxadmin.EngineSocket(b.e.getenv)
	fi, err := os.Stat(sock)
	if err != nil {
		return sandboxadmin.ErrEngineUnreachable(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	var r [3]byte
	_, _ = rand.Read(r[:])
	b.l1Name = b.containerName() + "-" + hex.EncodeToString(r[:])
	args := append([]string{"run", "-d", "--name", b.l1Name}, l1Flags...)
	if os.Getuid() == 0 {
		// fluffy run as root: the kernel hands each L2 output directory to
		// the sandbox group (chown), reads what the sandbox user wrote and
		// removes it afterwards. Root without these three file
		// capabilities cannot; a non-root user's kernel needs none (it
		// uses its own group). The rest stays dropped.
		args = append(args, "--cap-add", "CHOWN", "--cap-add", "DAC_OVERRIDE", "--cap-add", "FOWNER")
	}
	args = append(args,
		"--label", "io.fluffy.project="+b.project,
		"--user", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()), "--group-add", strconv.Itoa(int(st.Gid)),
		"-v", filepath.Dir(exe)+":"+filepath.Dir(exe)+":ro", // fluffy and its builtin plugins
		"-v", b.e.home+":"+b.e.home,
		"-v", b.project+":"+b.project, // same path as on the host, so L2 bind mounts resolve
		"-v", sock+":"+sock,
		// The host's root, read-only: the kernel checks the toolchain
		// directories it hands to L2 (GOROOT, module cache, /usr) there.
		"-v", "/:/host:ro", "-e", "FLUFFY_HOST_ROOT=/host",
		"-e", "FLUFFY_HOME="+b.e.home, "-e", "HOME="+userHome(), "-e", "FLUFFY_IN_L1=1",
		"-w", b.project)
	for _, v := range keyVars {
		if b.e.getenv(v) != "" {
			args = append(args, "-e", v) // by name: the value is not on the command line
		}
	}
	// The host's Go build cache is the host's `go env GOCACHE`, which
	// only the host can ask; the kernel in L1 checks it under /host.
	// "off" when the host has none (or the user turned it off).
	hostGoCache := "off"
	if gc := kernelapi.HostGoCache(b.e.getenv, b.e.home, b.project); gc != "" {
		hostGoCache = gc
	}
	args = append(args, "-e", kernelapi.EnvHostGoCache+"="+hostGoCache)
	args = append(args, image, exe, "kernel", "--project", b.project, "--log", b.paths.Log)
	cmd := exec.CommandContext(ctx, b.cli, args...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return uerr.Wrap(err, "KERNEL_START_FAILED", "cannot start the kernel's L1 container", strings.TrimSpace(string(out)),
			"check that the container engine works (`"+b.cli+" info`), or run the kernel as a local process with --l1=none")
	}
	return nil
}

// stopOwn removes this project's L1 containers (the crashed one); nothing
// else is touched. A local kernel that hangs is killed via its lock file's
// pid. A socket nobody serves any more is removed.
func (b *bootstrap) stopOwn() {
	defer func() {
		// A dying kernel closes its connections before its lock; wait
		// for the lock so a kernel still exiting keeps its socket.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if lockFree(b.paths.Lock) {
				_ = os.Remove(b.paths.Socket)
				return
			}
		}
	}()
	if b.l1 && b.cli != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// A killed kernel's container is already being removed (--rm):
		// `rm -f` then fails with "removal in progress" while the
		// container is still listed. Wait until none is listed, so a
		// restart or a give-up leaves nothing behind.
		for ctx.Err() == nil {
			out, err := exec.CommandContext(ctx, b.cli, "ps", "-aq", "--filter", "label=io.fluffy.l1=1", "--filter", "label=io.fluffy.project="+b.project).Output()
			ids := strings.Fields(string(out))
			if err != nil || len(ids) == 0 {
				return
			}
			for _, id := range ids {
				_ = exec.CommandContext(ctx, b.cli, "rm", "-f", id).Run()
			}
			time.Sleep(100 * time.Millisecond)
		}
		return
	}
	if pidb, err := os.ReadFile(b.paths.Lock); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(pidb))); err == nil && pid > 1 && !lockFree(b.paths.Lock) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// lockFree reports whether no kernel holds the project lock.
func lockFree(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return true
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return false
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return true
}

// supervise health-checks the kernel every interval until ctx ends. When it
// stops answering, it is restarted (within the limit) and onReconnect gets
// the new client; the error is returned when the limit is reached.
func (b *bootstrap) supervise(ctx context.Context, cl *ipc.Client, interval time.Duration, onReconnect func(*ipc.Client)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-cl.Done():
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := cl.Ping(pctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				continue
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		cl.Close()
		next, err := b.restart(ctx)
		if err != nil {
			return err
		}
		cl = next
		if onReconnect != nil {
			onReconnect(cl)
		}
	}
}

// userHome is the invoking user's home: `~` in the policy's toolchains
// means the same directory in L1 as on the host.
func userHome() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return "/nonexistent"
}
