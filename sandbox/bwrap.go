package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// BwrapUsable reports whether bubblewrap is installed and can create its
// namespaces here (it cannot in some containers and hardened kernels).
func BwrapUsable() (string, error) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return "", fmt.Errorf("bubblewrap is not installed: %w", err)
	}
	// The probe binds the whole tree read-only, so a mount that the
	// container engine adds or removes meanwhile (another container
	// starting or stopping) fails it once with EINVAL or ENOENT: that
	// says nothing about bubblewrap, and the answer is kept, so such a
	// failure is tried again before it counts.
	var out []byte
	for attempt := 1; ; attempt++ {
		probe := exec.Command(path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true")
		if out, err = probe.CombinedOutput(); err == nil {
			return path, nil
		}
		if attempt == probeAttempts || !mountRaced(string(out)) {
			break
		}
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
	return "", fmt.Errorf("bubblewrap cannot create a sandbox here: %v: %s", err, textsafe.Line(string(out), 400))
}

// probeAttempts bounds the retries of a probe that lost a mount race.
const probeAttempts = 5

// mountRaced says whether bwrap's output is a mount of the host tree that
// changed under it, not a refusal of its namespaces.
func mountRaced(out string) bool {
	return (strings.Contains(out, "Can't bind mount") || strings.Contains(out, "Unable to apply mount flags")) &&
		(strings.Contains(out, "Invalid argument") || strings.Contains(out, "No such file or directory"))
}

// CodeBwrapUnavailable: the bwrap sandbox was chosen and bubblewrap is
// missing or cannot create its namespaces here.
const CodeBwrapUnavailable = "SANDBOX_BWRAP_UNAVAILABLE"

// ErrBwrapUnavailable is the error of the bwrap sandbox when cause (from
// BwrapUsable) says bubblewrap cannot run: it names bubblewrap, not a
// container engine, since the bwrap sandbox needs none.
func ErrBwrapUnavailable(cause error) *uerr.Error {
	fix := "install bubblewrap: `sudo apt install bubblewrap` (Debian/Ubuntu) or `sudo dnf install bubblewrap` (Fedora); or use the docker sandbox (`fluffy config set sandbox docker`)"
	if !errors.Is(cause, exec.ErrNotFound) {
		fix = "allow unprivileged user namespaces (e.g. `sudo sysctl kernel.unprivileged_userns_clone=1`, or an AppArmor profile for bwrap), or use the docker sandbox (`fluffy config set sandbox docker`)"
	}
	return uerr.Wrap(cause, CodeBwrapUnavailable, "cannot start plugin sandboxes: bubblewrap is not usable",
		cause.Error()+"; the bwrap sandbox (sandbox: bwrap, --sandbox bwrap) runs every plugin in a bubblewrap jail", fix)
}

// jail builds a bubblewrap command: an empty root with only the given binds,
// fresh namespaces (no network), no capabilities, dying with its parent.
type jail struct {
	bwrap  string
	binary string // host path; mounted read-only at /plugin/<guest>
	guest  string // file name inside the jail
	dir    string // host dir bound at the same path (go-plugin sockets via TMPDIR)
	ro     [][2]string
	rw     [][2]string
	env    []string
	// tmpInTmpfs: TMPDIR is the jail's /tmp, and go-plugin's socket goes
	// to dir through PLUGIN_UNIX_SOCKET_DIR (dir is bounded by the quota
	// watcher to what a socket needs; compilers write their temporary
	// files to TMPDIR).
	tmpInTmpfs bool
	// stop, if set, kills bwrap's whole process group when it is
	// cancelled (the quota watcher's kill); bwrap then runs in a process
	// group of its own.
	stop context.Context
	// outTmpfs, if set, mounts /out as a tmpfs of that many bytes in the
	// jail (no bind from the host).
	outTmpfs int64
	// sockTmpfs mounts dir as a tmpfs of sockQuotaBytes in the jail
	// instead of binding the host's dir; the kernel reaches the plugin's
	// socket through /proc/PID/root (see bwrapJail).
	sockTmpfs bool
	// info receives bwrap's --info-fd JSON (the jail's pid); block, if
	// set, holds the jail before it runs the plugin (--block-fd) until
	// the kernel writes to it.
	info, block *os.File
}

func (j jail) command() *exec.Cmd {
	guest := j.guest
	if guest == "" {
		guest = filepath.Base(j.binary)
	}
	guestBin := GuestPluginDir + "/" + guest
	args := []string{
		"--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--tmpfs", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind", j.binary, guestBin,
	}
	if j.sockTmpfs {
		args = append(args, "--size", strconv.Itoa(sockQuotaBytes), "--perms", "0700", "--tmpfs", j.dir)
	} else {
		args = append(args, "--bind", j.dir, j.dir)
	}
	if j.outTmpfs > 0 {
		args = append(args, "--size", strconv.FormatInt(j.outTmpfs, 10), "--perms", "0700", "--tmpfs", GuestOut)
	}
	if j.info != nil {
		args = append(args, "--info-fd", "3")
		if j.block != nil {
			args = append(args, "--block-fd", "4")
		}
	}
	for _, b := range j.ro {
		args = append(args, "--ro-bind", b[0], b[1])
	}
	for _, b := range j.rw {
		args = append(args, "--bind", b[0], b[1])
	}
	args = append(args, "--remount-ro", "/", "--chdir", "/", "--", guestBin)
	cmd := exec.Command(j.bwrap, args...)
	if j.stop != nil {
		cmd = exec.CommandContext(j.stop, j.bwrap, args...)
	}
	cmd.Env = append([]string{"TMPDIR=" + j.dir, "HOME=/tmp", rt.EnvExitWhenOrphaned + "=1"}, j.env...)
	if j.tmpInTmpfs {
		cmd.Env = append([]string{"TMPDIR=/tmp", plugin.EnvUnixSocketDir + "=" + j.dir, "HOME=/tmp", rt.EnvExitWhenOrphaned + "=1"}, j.env...)
	}
	if j.info != nil {
		cmd.ExtraFiles = []*os.File{j.info}
		if j.block != nil {
			cmd.ExtraFiles = append(cmd.ExtraFiles, j.block)
		}
	}
	// bwrap itself dies with the kernel (and takes the jail with it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if j.stop != nil {
		// Killing bwrap kills the jail: its init gets --die-with-parent's
		// SIGKILL, and with it every process of the jail's pid namespace.
		cmd.SysProcAttr.Setpgid = true
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	}
	return cmd
}

// EnvRequireJail names the variable that forbids AdapterJail's fallback:
// when it is non-empty (CI sets it), a runtime adapter that bubblewrap
// cannot jail is not started at all (CodeJailRequired) instead of running
// as a plain subprocess.
const EnvRequireJail = "FLUFFY_REQUIRE_JAIL"

// CodeJailRequired: bubblewrap is unusable while the jail is required.
const CodeJailRequired = "RUNTIME_ADAPTER_NOT_JAILED"

// AdapterJail launches runtime adapter plugins (runtime-docker) in a
// bubblewrap jail in which only the adapter's binary, its go-plugin socket
// directory and the engine socket are visible. Where bubblewrap cannot run
// it starts the adapter as a plain subprocess and warns once, loudly —
// unless Require is set, which makes that an error.
type AdapterJail struct {
	Lease *Lease
	// Binaries is where LaunchAdapter verifies the adapter into (the
	// kernel's $FLUFFY_HOME/cas); nil: a store in the lease's directory.
	Binaries *BinaryStore
	// EngineSocket is the engine's unix socket on the host (default
	// /var/run/docker.sock, or DOCKER_HOST's unix:// path).
	EngineSocket string
	Logger       hclog.Logger
	// InL1 says the kernel itself runs in fluffy's L1 container, which
	// confines the adapter in bubblewrap's place (read-only root, no
	// capabilities, only the home, the project and the engine socket):
	// running it without bubblewrap there is expected, not an alarm.
	InL1 bool
	// Require refuses the plain-subprocess fallback (callers set it from
	// EnvRequireJail): Prepare fails with CodeJailRequired when bubblewrap
	// cannot run, even in L1.
	Require bool

	once   sync.Once
	bwrap  string
	reason error
}

// Jailed reports whether adapters run inside bubblewrap (false: plain
// subprocess) and, if not, why.
func (a *AdapterJail) Jailed() (bool, error) {
	a.probe()
	return a.bwrap != "", a.reason
}

func (a *AdapterJail) probe() {
	a.once.Do(func() {
		if a.Logger == nil {
			a.Logger = hclog.NewNullLogger()
		}
		a.bwrap, a.reason = BwrapUsable()
		if a.reason != nil && a.Require {
			return // Prepare refuses; no fallback to announce
		}
		if a.reason != nil && a.InL1 {
			a.Logger.Info("the runtime adapter runs without bubblewrap, confined by the L1 container", "reason", a.reason.Error())
		} else if a.reason != nil {
			a.Logger.Warn("!!! RUNTIME ADAPTER IS NOT JAILED: bubblewrap is unavailable, so the container-runtime adapter runs as a plain subprocess with full access to this user's files. Install bubblewrap (`apt install bubblewrap`) to confine it.", "reason", a.reason.Error())
		}
	})
}

// Prepare implements the launcher contract for runtime adapters.
func (a *AdapterJail) Prepare(_ context.Context, spec LaunchSpec, cfg *plugin.ClientConfig) (Launched, error) {
	a.probe()
	if a.reason != nil && a.Require {
		return Launched{}, uerr.Wrap(a.reason, CodeJailRequired, "the runtime adapter cannot be jailed",
			a.reason.Error()+"; "+EnvRequireJail+" is set, so it is not started as a plain subprocess",
			"install bubblewrap (`apt install bubblewrap`) where it can create namespaces, or unset "+EnvRequireJail+" to allow the unjailed fallback")
	}
	if err := checkBinary(spec); err != nil {
		return Launched{}, err
	}
	sock := a.EngineSocket
	if sock == "" {
		sock = "/var/run/docker.sock"
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		if err == nil {
			err = fmt.Errorf("%s is not a unix socket", sock)
		}
		return Launched{}, ErrEngineUnreachable(err)
	}
	dir := filepath.Join(a.Lease.Dir, "jail", safeName(spec.Name+"-"+spec.InstanceID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Launched{}, fmt.Errorf("adapter jail dir: %w", err)
	}
	env := []string{"DOCKER_HOST=unix://" + sock}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if a.bwrap == "" {
		cmd := exec.Command(spec.Binary)
		cmd.Args[0] = guestName(spec)
		cmd.Env = append([]string{"TMPDIR=" + dir, "HOME=" + dir, rt.EnvExitWhenOrphaned + "=1"}, env...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cfg.Cmd = cmd
	} else {
		cfg.Cmd = jail{bwrap: a.bwrap, binary: spec.Binary, guest: guestName(spec), dir: dir, rw: [][2]string{{sock, sock}}, env: env}.command()
	}
	cfg.SkipHostEnv = true
	return Launched{Cleanup: cleanup}, nil
}

// Bwrap is the daemonless L2 runtime, chosen explicitly by the user
// (`sandbox: bwrap`, `--sandbox bwrap`): each plugin runs in a bubblewrap jail with fresh
// namespaces (no network), the workspace read-only at /workspace and its
// output directory at /out. It cannot enforce memory, CPU or pids limits
// (no cgroups without a daemon); the docker runtime is the default for that
// reason. Where bubblewrap can size a tmpfs (--size, 0.7 and later), /out
// (the template's OutBytes) and the socket directory (1 MiB) are tmpfs of
// their limit in the jail: writes past it fail with ENOSPC there, /out is
// copied to the host OutDir after each call (tool and VCS plugins), and a
// full one stops the sandbox with SANDBOX_QUOTA_EXCEEDED. The build cache
// /cache (CacheBytes), and /out and the socket directory of an older
// bubblewrap, are host directories measured by the quota watcher while the
// jail runs; over a limit bwrap's process group is killed, what it wrote
// there is discarded and Status reports SANDBOX_QUOTA_EXCEEDED.
type Bwrap struct {
	Lease *Lease
	// CacheBytes bounds the build cache (/cache) a sandbox may grow;
	// 0: DefaultBwrapCacheBytes.
	CacheBytes int64
	Logger     hclog.Logger
	bwrap      string
	reason     error
	once       sync.Once
	// sized: this bubblewrap mounts size-limited tmpfs (--size).
	sized bool
}

// Prepare implements the launcher contract.
func (b *Bwrap) Prepare(_ context.Context, spec LaunchSpec, cfg *plugin.ClientConfig) (Launched, error) {
	b.once.Do(func() {
		b.bwrap, b.reason = BwrapUsable()
		if b.reason == nil {
			b.sized = bwrapSizedTmpfs(b.bwrap)
			if !b.sized && b.Logger != nil {
				b.Logger.Warn("this bubblewrap cannot size a tmpfs (--size needs bubblewrap 0.7): a bwrap sandbox's /out is a watched host directory, bounded only after the fact")
			}
		}
	})
	if b.reason != nil {
		return Launched{}, ErrBwrapUnavailable(b.reason)
	}
	if err := checkBinary(spec); err != nil {
		return Launched{}, err
	}
	dir := filepath.Join(b.Lease.Dir, "jail", safeName(spec.Name+"-"+spec.InstanceID))
	if b.sized {
		// The socket directory is a tmpfs in the jail; on the host, dir
		// becomes a link to it once the jail exists (bwrapJail).
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return Launched{}, fmt.Errorf("jail dir: %w", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			return Launched{}, fmt.Errorf("jail dir: %w", err)
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return Launched{}, fmt.Errorf("jail dir: %w", err)
	}
	tpl, tplErr := LookupTemplate(templateOf(spec))
	limits := spec.Limits
	if tplErr == nil {
		limits = tpl.Effective(spec.Limits)
	}
	j := jail{bwrap: b.bwrap, binary: spec.Binary, guest: guestName(spec), dir: dir, tmpInTmpfs: true,
		env: []string{"FLUFFY_WORKSPACE=" + GuestWorkspace, "FLUFFY_OUT=" + GuestOut}}
	if spec.Workspace != "" {
		j.ro = append(j.ro, [2]string{spec.Workspace, GuestWorkspace})
	}
	// /out is a tmpfs of its limit in the jail where bubblewrap can size
	// one: copied to the host OutDir after each call for the kinds whose
	// outputs the kernel reads, never for the others.
	outTmpfs := spec.OutDir != "" && b.sized && limits.OutBytes > 0
	watchedOut := ""
	if spec.OutDir != "" {
		if err := os.MkdirAll(spec.OutDir, 0o700); err != nil {
			return Launched{}, fmt.Errorf("output dir: %w", err)
		}
		if outTmpfs {
			j.outTmpfs = limits.OutBytes
		} else {
			j.rw = append(j.rw, [2]string{spec.OutDir, GuestOut})
			watchedOut = spec.OutDir
		}
	}
	dirs := sandboxQuotaDirs(dir, dir, watchedOut, limits.OutBytes)
	if b.sized {
		dirs = dirs[1:] // the socket directory is a tmpfs of its limit
	}
	if tplErr == nil && tpl.RunsCode {
		for _, t := range toolchainMounts(spec.Toolchains) {
			j.ro = append(j.ro, [2]string{t.local(), t.Path})
		}
		cache := ""
		if spec.BuildCache != "" {
			if err := os.MkdirAll(spec.BuildCache, 0o700); err != nil {
				return Launched{}, fmt.Errorf("build cache: %w", err)
			}
			j.rw = append(j.rw, [2]string{spec.BuildCache, GuestCache})
			if spec.HostGoCache.Path != "" {
				j.ro = append(j.ro, [2]string{spec.HostGoCache.local(), GuestHostGoCache})
				j.env = append(j.env, hostGoCacheEnv(spec, GuestHostGoCache)...)
			}
			dirs = append(dirs, quotaDir{what: GuestCache + " (its build cache)", dir: spec.BuildCache, limit: cmp.Or(b.CacheBytes, DefaultBwrapCacheBytes)})
			cache = GuestCache
		}
		j.env = append(j.env, toolchainEnv(spec.Toolchains, cache)...)
	}
	q := &bwrapQuota{name: spec.Name, log: b.Logger}
	stopCtx, kill := context.WithCancel(context.Background())
	j.stop = stopCtx
	var jl *bwrapJail
	var out *bwrapOut
	var collect func(context.Context) error
	if b.sized {
		var err error
		if jl, err = newBwrapJail(dir); err != nil {
			kill()
			return Launched{}, err
		}
		j.sockTmpfs, j.info, j.block = true, jl.infoW, jl.blockR
		out = &bwrapOut{name: spec.Name, limits: limits, q: q, kill: kill, log: cmp.Or[hclog.Logger](b.Logger, hclog.NewNullLogger()), jail: jl, sockDir: dir}
		if outTmpfs {
			out.hostOut = spec.OutDir
		}
		if outputsRead(spec.Kind) {
			collect = out.collect
			cfg.GRPCDialOptions = append(cfg.GRPCDialOptions, grpc.WithChainUnaryInterceptor(collectAfterCommit(collect)))
		}
	}
	cfg.Cmd = j.command()
	cfg.SkipHostEnv = true
	if jl != nil {
		jl.start()
	}
	wctx, unwatch := context.WithCancel(context.Background())
	go watchQuota(wctx, dirs, func(o overQuota) { q.stop(o, kill, watchedOut, spec.BuildCache) })
	var once sync.Once
	cleanup := func() {
		once.Do(func() {
			unwatch()
			kill()
			if out != nil {
				out.close()
			}
			if jl != nil {
				jl.close()
			}
			_ = os.RemoveAll(dir)
		})
	}
	return Launched{Workspace: GuestWorkspace, OutDir: GuestOut, Cleanup: cleanup, Status: q.status, Collect: collect}, nil
}

// DefaultBwrapCacheBytes bounds a bwrap sandbox's build cache (/cache):
// a Go build cache of a large module stays well below it.
const DefaultBwrapCacheBytes = 4 << 30

// bwrapQuota is the quota watcher's side of one bwrap sandbox (the same
// watcher the Docker launcher runs): over a limit it kills bwrap's process
// group and discards what the plugin wrote to the directory over it.
type bwrapQuota struct {
	name  string
	log   hclog.Logger
	mu    sync.Mutex
	over  *overQuota
	ended bool // killed for its quota and the directory emptied
}

func (q *bwrapQuota) stop(o overQuota, kill context.CancelFunc, out, cache string) {
	q.mu.Lock()
	q.over = &o
	q.mu.Unlock()
	kill()
	if q.log != nil {
		q.log.Warn("sandbox stopped: disk quota exceeded", "plugin", q.name, "dir", o.dir, "bytes", o.used, "limit", o.limit, "entries", o.entries)
	}
	if o.dir == out || o.dir == cache {
		if err := emptyWhenQuiet(o.dir, 50*time.Millisecond, 10*time.Second); err != nil && q.log != nil {
			q.log.Warn("discarding an output over its quota", "dir", o.dir, "error", err)
		}
	}
	q.mu.Lock()
	q.ended = true
	q.mu.Unlock()
}

// status reports a sandbox stopped for its quota as exited, with the
// quota as its reason. bwrap's own exit is go-plugin's to wait for, so any
// other end is not reported here (Exited stays false; the supervisor then
// reports the broken connection).
func (q *bwrapQuota) status() Status {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := Status{State: StateRunning}
	if q.over != nil {
		s.State, s.Reason, s.Quota = StateFailed, "stopped: "+q.over.String(), q.over.String()
		s.Exited = q.ended
		s.ExitCode = 128 + int64(syscall.SIGKILL)
	}
	return s
}
