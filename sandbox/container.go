package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/diskfree"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// CodeKilledExternally: a sandbox was stopped by something other than the
// kernel that owns it. Not the plugin's fault, so callers must not blame it.
const CodeKilledExternally = "SANDBOX_KILLED_EXTERNALLY"

// CodeSocketUnreachable: the kernel could not reach the plugin's socket
// in its container because the plugin shut it out.
const CodeSocketUnreachable = "SANDBOX_SOCKET_UNREACHABLE"

// CodeEngineLost: the container engine stopped answering about a running
// sandbox (its wait ended without an exit status). Not the plugin's fault
// either.
const CodeEngineLost = "SANDBOX_ENGINE_LOST"

// Hard settings of every L2 container: constants, never options.
var (
	hardCapDrop = []string{"ALL"}
)

const (
	hardReadOnlyRootfs  = true
	hardNoNewPrivileges = true
	// logMaxBytes bounds what the engine keeps of a plugin's output.
	logMaxBytes = 1 << 20
	tmpfsBytes  = 64 << 20
)

// ContainersConfig is what the container launcher needs.
type ContainersConfig struct {
	// Runtime is the engine, normally a runtime plugin's client.
	Runtime Runtime
	// Lease is this kernel's lease; its KernelID labels every container and
	// its Dir holds the per-plugin socket directories.
	Lease *Lease
	// OCIRuntimes picks a non-default OCI runtime per template (e.g.
	// {"code-executor": "runsc"}); checked against what the engine offers.
	OCIRuntimes map[string]string
	// Auditor receives every proxied network request (may be nil).
	Auditor Auditor
	// NetworkPolicy, when set, must allow every host a plugin reaches
	// through the proxy besides its manifest (the policy's
	// network_whitelist).
	NetworkPolicy NetworkPolicy
	Logger        hclog.Logger
}

// Containers starts plugins in L2 containers through a Runtime. It is the
// supervisor's launcher: Prepare fills a go-plugin ClientConfig.
type Containers struct {
	cfg      ContainersConfig
	log      hclog.Logger
	image    string
	runtimes []string
	uid, gid int
	// archiver reads a container's /out through the engine; nil when the
	// runtime adapter cannot (then /out is a watched host bind mount).
	archiver rt.Archiver
	// sockBind is set once a container's socket tmpfs could not be
	// reached from the host (see guestSock): every later container's
	// socket directory is then a watched host bind mount.
	sockBind atomic.Bool
}

// NewContainers checks the engine (RUNTIME_UNREACHABLE with install
// guidance when it does not answer), validates the OCI runtime choices and
// imports the base image once.
func NewContainers(ctx context.Context, cfg ContainersConfig) (*Containers, error) {
	if cfg.Runtime == nil || cfg.Lease == nil {
		return nil, errors.New("sandbox containers: Runtime and Lease are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	pi, err := RequireEngine(ctx, cfg.Runtime)
	if err != nil {
		return nil, err
	}
	for tpl, want := range cfg.OCIRuntimes {
		if _, err := LookupTemplate(tpl); err != nil {
			return nil, err
		}
		if _, err := SelectRuntime(want, pi.Runtimes); err != nil {
			return nil, err
		}
	}
	ref, err := EnsureBaseImage(ctx, cfg.Runtime)
	if err != nil {
		return nil, err
	}
	uid, gid := GuestIdentity()
	return &Containers{cfg: cfg, log: cfg.Logger, image: ref, runtimes: pi.Runtimes, uid: uid, gid: gid,
		archiver: probeArchiver(ctx, cfg.Runtime)}, nil
}

// probeArchiver is the runtime's Archiver if its adapter serves it: an
// adapter without the archive service answers Unimplemented, any other
// answer (the probed container does not exist) means it does.
func probeArchiver(ctx context.Context, r Runtime) rt.Archiver {
	a, ok := r.(rt.Archiver)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc, err := a.CopyFrom(ctx, "fluffy-archive-probe-none", "/")
	if err == nil {
		rc.Close()
	} else if status.Code(err) == codes.Unimplemented {
		return nil
	}
	return a
}

// Image is the base image reference containers run from.
func (c *Containers) Image() string { return c.image }

// guestName is the file name the plugin's binary has inside its sandbox
// and its argv[0]: the installed entry's name, not the BinaryStore copy's
// (its hash).
func guestName(spec LaunchSpec) string {
	if n := filepath.Base(spec.EntryName); spec.EntryName != "" && n != "." && n != "/" && n != ".." {
		return n
	}
	return filepath.Base(spec.Binary)
}

// checkBinary verifies the plugin binary exists and, unless the supervisor
// already verified it into the BinaryStore (spec.Verified), that it
// matches spec.SHA256. Launchers never use go-plugin's SecureConfig (see
// LaunchSpec.SHA256), so this is their whole checksum contract.
func checkBinary(spec LaunchSpec) error {
	if _, err := os.Stat(spec.Binary); err != nil {
		return uerr.Wrap(err, "SANDBOX_BINARY_MISSING", "cannot start plugin "+spec.Name, err.Error(),
			"reinstall the plugin with `fluffy plugin install`")
	}
	if spec.Verified || spec.SHA256 == "" {
		return nil
	}
	got, err := manifests.FileSHA256(spec.Binary)
	if err != nil {
		return fmt.Errorf("hash %s: %w", spec.Binary, err)
	}
	if !strings.EqualFold(got, spec.SHA256) {
		return uerr.New(CodeBinaryMismatch, "plugin "+spec.Name+" was modified after install",
			fmt.Sprintf("its binary hashes to %s, the registry says %s", got, spec.SHA256),
			"reinstall the plugin with `fluffy plugin install` and review where the change came from")
	}
	return nil
}

// Prepare implements the supervisor's launcher contract: the plugin will run
// in its own container, reachable only through go-plugin's socket directory.
func (c *Containers) Prepare(ctx context.Context, spec LaunchSpec, cfg *plugin.ClientConfig) (Launched, error) {
	if err := checkBinary(spec); err != nil {
		return Launched{}, err
	}
	tplName := templateOf(spec)
	tpl, err := LookupTemplate(tplName)
	if err != nil {
		return Launched{}, err
	}
	if want := c.cfg.OCIRuntimes[tplName]; want != "" {
		tpl.OCIRuntime = want
	}
	seccomp, err := SeccompProfile(tpl.Seccomp)
	if err != nil {
		return Launched{}, err
	}
	spec.KernelID, spec.Owner = c.cfg.Lease.KernelID, c.cfg.Lease.Owner
	sockBase := filepath.Join(c.cfg.Lease.Dir, "sock")
	sd, err := confine.MkdirAll(c.cfg.Lease.Dir, "sock", 0o755)
	if err != nil {
		return Launched{}, fmt.Errorf("socket dir: %w", err)
	}
	sd.Close()
	limits := tpl.Effective(spec.Limits)
	if err := diskfree.Ensure(sockBase, sockQuotaBytes, "plugin "+spec.Name+"'s socket directory"); err != nil {
		return Launched{}, err
	}
	if spec.OutDir != "" {
		if err := prepareOutDir(spec.OutDir, c.gid); err != nil {
			return Launched{}, err
		}
		if err := diskfree.Ensure(spec.OutDir, limits.OutBytes, "plugin "+spec.Name+"'s /out"); err != nil {
			return Launched{}, err
		}
	}
	spec = codeMounts(tpl, spec)
	if spec.BuildCache != "" {
		if err := prepareCacheDir(spec.BuildCache, c.gid); err != nil {
			return Launched{}, err
		}
	}
	lc := NewLifecycle()
	var proxy *Proxy
	if tpl.Network == NetProxy {
		proxy, err = StartProxy(filepath.Join(c.cfg.Lease.Dir, "proxy", safeName(spec.InstanceID)), ProxyConfig{
			Plugin: spec.Name, Instance: spec.InstanceID, Allow: spec.Network, Policy: c.cfg.NetworkPolicy, Auditor: c.cfg.Auditor, Logger: c.log,
		})
		if err != nil {
			return Launched{}, err
		}
		lc.OnCleanup("stop proxy", proxy.Close)
	}
	cr := &containerRunner{
		c: c, spec: spec, tpl: tpl, seccomp: seccomp, lc: lc, proxy: proxy,
		limits: limits, outVolume: spec.OutDir != "" && c.archiver != nil && outputsRead(spec.Kind),
		outPrivate: spec.OutDir != "" && c.archiver != nil && !outputsRead(spec.Kind),
		sockTmpfs:  c.sockTmpfs(tpl),
	}
	var collect func(context.Context) error
	if outputsRead(spec.Kind) && (cr.outVolume || cr.sockTmpfs) {
		collect = cr.collect
		cfg.GRPCDialOptions = append(cfg.GRPCDialOptions, grpc.WithChainUnaryInterceptor(cr.collectUnary))
	}
	cfg.Cmd = nil
	cfg.RunnerFunc = cr.runnerFunc
	cfg.SkipHostEnv = true
	cfg.GRPCBrokerMultiplex = true
	cfg.UnixSocketConfig = &plugin.UnixSocketConfig{TempDir: sockBase, Group: strconv.Itoa(c.gid)}
	return Launched{
		Workspace: GuestWorkspace, OutDir: GuestOut,
		Cleanup: func() { _ = lc.Cleanup() },
		Status:  cr.status,
		Collect: collect,
	}, nil
}

// sockTmpfs says whether a container of tpl gets its socket directory as
// a tmpfs of sockQuotaBytes that the kernel reaches through
// /proc/PID/root. A runtime other than runc (gVisor, a VM) keeps its
// mounts where the host's /proc does not reach, so it keeps the watched
// bind mount, as does every container once one's tmpfs was unreachable.
func (c *Containers) sockTmpfs(tpl Template) bool {
	why := ""
	switch {
	case c.sockBind.Load():
		why = "an earlier container's socket directory was out of the kernel's reach"
	case tpl.OCIRuntime != "" && tpl.OCIRuntime != "runc":
		why = "its OCI runtime " + tpl.OCIRuntime + " keeps the container's mounts out of the host's /proc"
	default:
		return true
	}
	c.log.Warn("a sandbox's socket directory is a watched host directory, bounded only after the fact (a fast writer can put more than 1 MiB on the host disk before it is stopped)",
		"template", tpl.Name, "reason", why)
	return false
}

func safeName(s string) string {
	if s == "" {
		return "anon"
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == '.' {
			return '_'
		}
		return r
	}, s)
}

// prepareOutDir makes the output directory writable by the sandbox user
// (through the shared group) and nobody else. Its last component is
// created without following a link (confine.MkdirAll), and the mode and
// group are set through that handle, so a link planted in its place is
// refused instead of chmod-ing whatever it points at.
func prepareOutDir(dir string, gid int) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("output dir %s: %w", dir, err)
	}
	f, err := confine.MkdirAll(parent, filepath.Base(dir), 0o770)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Chown(-1, gid); err != nil {
		return fmt.Errorf("output dir %s: %w", dir, err)
	}
	if err := f.Chmod(outDirMode); err != nil {
		return fmt.Errorf("output dir %s: %w", dir, err)
	}
	return nil
}

// OperationDir creates <outDir>/<operationID>/ for one operation (one
// subdirectory per operation) and returns its host path.
func OperationDir(outDir, operationID string) (string, error) {
	if confine.Name(operationID) != nil {
		return "", uerr.New("SANDBOX_BAD_OPERATION_ID", fmt.Sprintf("invalid operation id %q", operationID),
			"an operation id names one directory under the output directory", "use a plain name without slashes")
	}
	f, err := confine.MkdirAll(outDir, operationID, 0o770)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// Mkdir's mode passes through the umask; the sandbox user writes
	// through the group, so set the bits explicitly.
	if err := f.Chmod(outDirMode); err != nil {
		return "", fmt.Errorf("operation dir %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// Status is a snapshot of a launched sandbox.
type Status struct {
	State       State
	ContainerID string
	Exited      bool
	ExitCode    int64
	OOMKilled   bool
	// External: the sandbox was killed or removed by something other than
	// this kernel.
	External bool
	Reason   string
	// Quota says which disk limit the sandbox was stopped for ("" if none).
	Quota string
}

// containerRunner is one plugin instance's container; it implements
// go-plugin's runner.Runner.
type containerRunner struct {
	c       *Containers
	spec    LaunchSpec
	tpl     Template
	limits  Limits
	seccomp string
	lc      *Lifecycle
	proxy   *Proxy

	hostSock string
	env      []string
	logger   hclog.Logger

	id         string
	stdoutR    *io.PipeReader
	stdoutW    *io.PipeWriter
	stderrR    *io.PipeReader
	stderrW    *io.PipeWriter
	attachStop context.CancelFunc
	attachDone chan struct{}
	mu         sync.Mutex
	exit       *rt.Exit
	waitOnce   sync.Once
	waitDone   chan struct{}
	killOnce   sync.Once
	// killing is set before the kernel stops the container, so an exit by
	// signal can be told apart from one sent from outside fluffy.
	killing  atomic.Bool
	external bool // guarded by mu
	// quotaStop ends the disk quota watcher; over is why the watcher
	// stopped the sandbox (guarded by mu).
	quotaStop context.CancelFunc
	over      *overQuota
	// outVolume: /out is a size-limited tmpfs volume in the container,
	// copied to spec.OutDir by collect (one copy at a time: collectMu).
	outVolume bool
	collectMu sync.Mutex
	// outPrivate: nothing on the host reads this kind's /out, so it is the
	// same tmpfs volume, never copied out. (An adapter that serves the
	// archive service is one that knows tmpfs volumes: an older one would
	// make an unbounded volume, so it keeps the watched bind mount.)
	outPrivate bool
	// sockTmpfs: the socket directory is a tmpfs of sockQuotaBytes in the
	// container, reached through guest (guarded by mu) once it started;
	// otherwise it is the host's hostSock, bind mounted and watched.
	sockTmpfs bool
	guest     *guestSock
}

// outputsRead says whether the kernel reads what a plugin of kind writes
// to /out: a tool's outputs, a VCS plugin's commit objects.
func outputsRead(kind string) bool { return kind == "tool" || kind == "vcs" }

var _ runner.Runner = (*containerRunner)(nil)

func (r *containerRunner) runnerFunc(l hclog.Logger, cmd *exec.Cmd, tmpDir string) (runner.Runner, error) {
	r.logger, r.hostSock = l, tmpDir
	// The socket directory is removed by go-plugin on a clean Kill; make
	// sure it also goes when the sandbox is cleaned up.
	r.lc.OnCleanup("remove socket dir", func() error { return os.RemoveAll(tmpDir) })
	env := make([]string, 0, len(cmd.Env)+8)
	for _, kv := range cmd.Env {
		if strings.HasPrefix(kv, plugin.EnvUnixSocketDir+"=") {
			kv = plugin.EnvUnixSocketDir + "=" + GuestSocketDir
		}
		env = append(env, kv)
	}
	procs := max(1, int(r.limits.CPUs+0.999))
	env = append(env,
		rt.EnvExitWhenOrphaned+"=1",
		"GOMAXPROCS="+strconv.Itoa(procs),
		"HOME=/tmp", "TMPDIR=/tmp",
		"FLUFFY_WORKSPACE="+GuestWorkspace, "FLUFFY_OUT="+GuestOut,
		"FLUFFY_SANDBOX_TEMPLATE="+r.tpl.Name,
	)
	if r.proxy != nil {
		env = append(env, rt.EnvProxySocket+"="+GuestProxyDir+"/"+proxySocketName)
	}
	if r.tpl.RunsCode {
		cache := ""
		if r.spec.BuildCache != "" {
			cache = GuestCache
		}
		env = append(env, toolchainEnv(r.spec.Toolchains, cache)...)
		env = append(env, hostGoCacheEnv(r.spec, GuestHostGoCache)...)
	}
	r.env = env
	return r, nil
}

func (r *containerRunner) containerSpec() rt.Spec {
	bin := guestName(r.spec)
	mounts := []rt.Mount{
		{Type: rt.MountBind, Source: r.spec.Binary, Target: GuestPluginDir + "/" + bin, ReadOnly: true},
	}
	if r.sockTmpfs {
		mounts = append(mounts, rt.Mount{Type: rt.MountTmpfs, Target: GuestSocketDir, TmpfsSize: sockQuotaBytes, TmpfsMode: "1777"})
	} else {
		mounts = append(mounts, rt.Mount{Type: rt.MountBind, Source: r.hostSock, Target: GuestSocketDir})
	}
	if r.tpl.RunsCode {
		mounts = append(mounts, rt.Mount{Type: rt.MountTmpfs, Target: GuestTmp, TmpfsSize: codeTmpfsBytes, TmpfsMode: "1777", TmpfsExec: true})
		for _, t := range toolchainMounts(r.spec.Toolchains) {
			mounts = append(mounts, rt.Mount{Type: rt.MountBind, Source: t.Path, Target: t.Path, ReadOnly: true})
		}
		if r.spec.BuildCache != "" {
			mounts = append(mounts, rt.Mount{Type: rt.MountBind, Source: r.spec.BuildCache, Target: GuestCache})
			if r.spec.HostGoCache.Path != "" {
				mounts = append(mounts, rt.Mount{Type: rt.MountBind, Source: r.spec.HostGoCache.Path, Target: GuestHostGoCache, ReadOnly: true})
			}
		}
	} else {
		mounts = append(mounts, rt.Mount{Type: rt.MountTmpfs, Target: GuestTmp, TmpfsSize: tmpfsBytes, TmpfsMode: "1777"})
	}
	if r.spec.Workspace != "" {
		mounts = append(mounts, rt.Mount{Type: rt.MountBind, Source: r.spec.Workspace, Target: GuestWorkspace, ReadOnly: true})
	}
	switch {
	case r.outVolume || r.outPrivate:
		mounts = append(mounts, rt.Mount{Type: rt.MountVolume, Target: GuestOut, TmpfsSize: r.limits.OutBytes, TmpfsMode: "0770"})
	case r.spec.OutDir != "":
		mounts = append(mounts, rt.Mount{Type: rt.MountBind, Source: r.spec.OutDir, Target: GuestOut})
	}
	if r.proxy != nil {
		mounts = append(mounts, rt.Mount{Type: rt.MountBind, Source: r.proxy.Dir(), Target: GuestProxyDir, ReadOnly: true})
	}
	return rt.Spec{
		Name:            containerName(r.spec),
		Image:           r.c.image,
		Cmd:             []string{GuestPluginDir + "/" + bin},
		Env:             r.env,
		User:            fmt.Sprintf("%d:%d", r.c.uid, r.c.gid),
		WorkingDir:      GuestWorkspace,
		Labels:          labelsFor(r.spec, r.tpl.Name),
		Mounts:          mounts,
		NetworkMode:     "none", // NetProxy also has no interfaces: the proxy socket is the way out
		MemoryBytes:     r.limits.MemoryBytes,
		NanoCPUs:        int64(r.limits.CPUs * 1e9),
		PidsLimit:       int64(r.limits.Pids),
		ReadOnlyRootfs:  hardReadOnlyRootfs,
		NoNewPrivileges: hardNoNewPrivileges,
		CapDrop:         hardCapDrop,
		SeccompJSON:     r.seccomp,
		OCIRuntime:      r.tpl.OCIRuntime,
		LogMaxBytes:     logMaxBytes,
	}
}

// Start creates the container, attaches to its output and starts it. A
// container whose socket tmpfs the kernel cannot reach is discarded
// before go-plugin reads a line of it, and started again with a watched
// bind mount (and so is every later one; the log says why).
func (r *containerRunner) Start(ctx context.Context) error {
	if err := r.start(ctx); err != nil {
		return err
	}
	if r.sockTmpfs {
		switch err := r.openGuest(ctx); {
		case err == nil:
		case errors.Is(err, errGuestRefused):
			r.discard()
			r.lc.Fail(err.Error())
			_ = r.lc.Cleanup()
			return uerr.Wrap(err, CodeSocketUnreachable, "plugin "+r.spec.Name+" could not be reached in its sandbox",
				err.Error()+"; a plugin's socket lives in its container, which the kernel enters through /proc (a process that makes itself undumpable shuts it out)",
				"report it to the plugin's author: a plugin must not change its dumpable flag")
		case errors.Is(err, errGuestGone) && !r.runsStill(ctx):
			// It already ended: go-plugin reports how.
		default:
			r.c.sockBind.Store(true)
			r.c.log.Warn("cannot reach a container's socket tmpfs from the host: socket directories are watched host directories from now on, bounded only after the fact",
				"plugin", r.spec.Name, "error", err)
			r.discard()
			r.sockTmpfs = false
			if err := r.start(ctx); err != nil {
				return err
			}
		}
	}
	_ = r.lc.To(StateRunning)
	r.watchQuota()
	return nil
}

// runsStill says whether the engine still runs the container under the
// same pid a moment after that pid was found to be no process here: then
// its pids are not this machine's. (Right after its init exits the engine
// may not have noticed yet: a plugin that exits at once must not look
// like such an engine.)
func (r *containerRunner) runsStill(ctx context.Context) bool {
	before, found, err := r.c.cfg.Runtime.Inspect(ctx, r.id)
	if err != nil || !found || !before.Running {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(500 * time.Millisecond):
	}
	after, found, err := r.c.cfg.Runtime.Inspect(ctx, r.id)
	return err == nil && found && after.Running && after.Pid == before.Pid
}

// openGuest opens the running container's socket directory (guestSock).
func (r *containerRunner) openGuest(ctx context.Context) error {
	st, found, err := r.c.cfg.Runtime.Inspect(ctx, r.id)
	if err != nil || !found {
		return fmt.Errorf("inspect container %s: found=%v %v", shortID(r.id), found, err)
	}
	g, err := openGuestSock(st.Pid, r.id, r.c.uid)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.guest = g
	r.mu.Unlock()
	r.lc.OnCleanup("close the container's socket directory", func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.guest == nil {
			return nil
		}
		err := r.guest.close()
		r.guest = nil
		return err
	})
	return nil
}

// discard removes a container that just started, before anything read
// its output (its pipes are closed, so its attach ends), freeing its name
// for the next one.
func (r *containerRunner) discard() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := r.c.cfg.Runtime.Remove(ctx, r.id, true, true); err != nil {
		r.c.log.Warn("removing a discarded sandbox", "plugin", r.spec.Name, "error", err)
	}
	r.attachStop()
	r.stdoutR.Close()
	r.stderrR.Close()
	<-r.attachDone
}

// start creates and starts one container for the runner.
func (r *containerRunner) start(ctx context.Context) error {
	rtm := r.c.cfg.Runtime
	id, err := rtm.Create(ctx, r.containerSpec())
	if err != nil {
		r.lc.Fail(err.Error())
		_ = r.lc.Cleanup()
		return fmt.Errorf("sandbox %s: %w", r.spec.Name, err)
	}
	r.id = id
	r.lc.OnCleanup("remove container", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		return rtm.Remove(ctx, id, true, true)
	})
	r.stdoutR, r.stdoutW = io.Pipe()
	r.stderrR, r.stderrW = io.Pipe()
	r.waitDone = make(chan struct{})
	actx, cancel := context.WithCancel(context.Background())
	r.attachStop = cancel
	r.attachDone = make(chan struct{})
	attached := make(chan struct{})
	attachErr := make(chan error, 1)
	go func() {
		defer close(r.attachDone)
		var once sync.Once
		err := rtm.Attach(actx, id, func() { once.Do(func() { close(attached) }) }, func(s rt.Stream, data []byte) error {
			w := r.stdoutW
			if s == rt.Stderr {
				w = r.stderrW
			}
			_, err := w.Write(data)
			return err
		})
		attachErr <- err
		r.stdoutW.Close()
		r.stderrW.Close()
	}()
	select {
	case <-attached:
	case err := <-attachErr:
		r.lc.Fail(fmt.Sprint("attach: ", err))
		_ = r.lc.Cleanup()
		return fmt.Errorf("sandbox %s: attach: %w", r.spec.Name, err)
	case <-ctx.Done():
		cancel()
		r.lc.Fail("start cancelled")
		_ = r.lc.Cleanup()
		return ctx.Err()
	}
	if err := rtm.Start(ctx, id); err != nil {
		cancel()
		r.lc.Fail(err.Error())
		_ = r.lc.Cleanup()
		return fmt.Errorf("sandbox %s: start: %w", r.spec.Name, err)
	}
	return nil
}

// watchQuota bounds the host directories the plugin can write where
// they are bind mounts: its socket directory (sockQuotaBytes) when it is
// not a tmpfs, and /out (the template's OutBytes) with an adapter without
// CopyFrom. A bind mount cannot carry a size, so the kernel measures them
// and stops the sandbox the moment one is over, then discards what it
// wrote there. Nothing is watched when both are filesystems of their size.
func (r *containerRunner) watchQuota() {
	out := r.spec.OutDir
	if r.outVolume || r.outPrivate {
		out = "" // bounded by its filesystem, see collect
	}
	dirs := sandboxQuotaDirs(GuestSocketDir, r.hostSock, out, r.limits.OutBytes)
	if r.sockTmpfs {
		dirs = dirs[1:] // a tmpfs of its size, see guestSock
	}
	if len(dirs) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.quotaStop = cancel
	r.mu.Unlock()
	go watchQuota(ctx, dirs, func(q overQuota) {
		r.mu.Lock()
		r.over = &q
		r.mu.Unlock()
		r.killing.Store(true)
		r.lc.Fail("stopped: " + q.String())
		kctx, kcancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer kcancel()
		if err := r.c.cfg.Runtime.Kill(kctx, r.id, ""); err != nil {
			r.c.log.Warn("stopping a sandbox over its disk quota", "plugin", r.spec.Name, "error", err)
		}
		r.c.log.Warn("sandbox stopped: disk quota exceeded", "plugin", r.spec.Name, "dir", q.dir, "bytes", q.used, "limit", q.limit, "entries", q.entries)
		if q.dir == r.spec.OutDir {
			// Wait for the container to stop writing, then discard.
			_, _ = r.c.cfg.Runtime.Wait(kctx, r.id)
			if err := emptyDir(q.dir); err != nil {
				r.c.log.Warn("discarding an output over its quota", "dir", q.dir, "error", err)
			}
		}
	})
}

func (r *containerRunner) Diagnose(ctx context.Context) string {
	st, found, err := r.c.cfg.Runtime.Inspect(ctx, r.id)
	if err != nil || !found {
		return fmt.Sprintf("container %s: not found (%v)", shortID(r.id), err)
	}
	msg := fmt.Sprintf("container %s status=%s exit=%d oom=%v", shortID(r.id), st.Status, st.ExitCode, st.OOMKilled)
	if st.Error != "" {
		msg += " error=" + st.Error
	}
	return msg
}

func (r *containerRunner) Stdout() io.ReadCloser { return r.stdoutR }
func (r *containerRunner) Stderr() io.ReadCloser { return r.stderrR }
func (r *containerRunner) Name() string          { return r.spec.Name }
func (r *containerRunner) ID() string            { return r.id }

// Wait blocks until the container stopped and reports how: an OOM kill is a
// SANDBOX_OOM error, a non-zero exit a SANDBOX_EXITED error.
func (r *containerRunner) Wait(ctx context.Context) error {
	r.waitOnce.Do(func() {
		go func() {
			defer close(r.waitDone)
			ex, err := r.c.cfg.Runtime.Wait(context.Background(), r.id)
			if err != nil {
				ex = rt.Exit{Code: -1, Error: err.Error()}
			}
			// The engine lost the container while we waited on it (removed
			// from outside: docker rm -f, a foreign reaper), or it died by
			// a signal this kernel did not send.
			external := !r.killing.Load() && (err != nil || (!ex.OOMKilled && (ex.Code == 128+9 || ex.Code == 128+15)))
			r.mu.Lock()
			r.exit = &ex
			r.external = external
			r.mu.Unlock()
			r.stopQuota()
			if r.lc.State() == StateRunning && (ex.OOMKilled || ex.Code != 0) {
				r.lc.Fail(exitReason(ex))
			}
		}()
	})
	select {
	case <-r.waitDone:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Let the output drain so go-plugin sees the last lines.
	select {
	case <-r.attachDone:
	case <-time.After(2 * time.Second):
		r.attachStop()
	}
	r.mu.Lock()
	ex, external, over := *r.exit, r.external, r.over
	r.mu.Unlock()
	return exitError(r.spec.Name, r.limits, ex, external, quotaReason(over))
}

func exitReason(ex rt.Exit) string {
	if ex.OOMKilled {
		return "killed: out of memory"
	}
	return fmt.Sprintf("exited with status %d %s", ex.Code, ex.Error)
}

func quotaReason(q *overQuota) string {
	if q == nil {
		return ""
	}
	return q.String()
}

func exitError(name string, l Limits, ex rt.Exit, external bool, quota string) error {
	switch {
	case quota != "":
		return uerr.New(CodeQuotaExceeded, "plugin "+name+" was stopped: it wrote more to disk than its sandbox allows",
			quota+"; what it wrote there was discarded so that the disk does not fill",
			"the plugin is restarted on its next use; ask it for smaller outputs, and if it keeps happening report it to the plugin's author")
	case ex.OOMKilled:
		return uerr.New("SANDBOX_OOM", "plugin "+name+" was killed: out of memory",
			fmt.Sprintf("it used more than its sandbox limit of %d MiB", l.MemoryBytes>>20),
			"the plugin will be restarted; if it keeps happening, report it to the plugin's author")
	case external && ex.Code < 0 && !strings.Contains(strings.ToLower(ex.Error), "no such container"):
		// The wait ended without an exit status, and not because the
		// container was removed: the engine, not the container, went
		// away (or the connection to it broke).
		return uerr.New(CodeEngineLost, "the container engine stopped answering while plugin "+name+" ran",
			strings.TrimSpace("waiting on its container ended without an exit status: the engine went away or the connection to it broke "+ex.Error),
			"check that the engine answers (`docker info`, and DOCKER_HOST if set); once it does, fluffy starts the plugin again on its next use: run the task again, the session keeps its state")
	case external:
		return uerr.New(CodeKilledExternally, "plugin "+name+"'s sandbox was stopped from outside fluffy",
			strings.TrimSpace(fmt.Sprintf("the container ended with status %d while this kernel still used it; something other than fluffy killed or removed it (docker kill/rm, another tool cleaning containers, an engine restart) %s", ex.Code, ex.Error)),
			"find what else manages containers on this engine (`docker events` shows who stops them); fluffy restarts the plugin on its next use")
	case ex.Code != 0:
		return uerr.New("SANDBOX_EXITED", fmt.Sprintf("plugin %s exited with status %d", name, ex.Code),
			strings.TrimSpace("its sandbox process ended "+ex.Error), "see the plugin's log with `fluffy sandbox ls` and the kernel log")
	}
	return nil
}

func (r *containerRunner) stopQuota() {
	r.mu.Lock()
	stop := r.quotaStop
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Kill stops the container and cleans up everything it used.
func (r *containerRunner) Kill(ctx context.Context) error {
	var err error
	r.killOnce.Do(func() {
		r.killing.Store(true)
		r.stopQuota()
		if r.id != "" {
			err = r.c.cfg.Runtime.Kill(ctx, r.id, "")
		}
		if r.attachStop != nil {
			r.attachStop()
		}
		if r.stdoutR != nil {
			r.stdoutR.Close()
			r.stderrR.Close()
		}
		if cerr := r.lc.Cleanup(); cerr != nil && err == nil {
			err = cerr
		}
	})
	return err
}

func (r *containerRunner) status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Status{State: r.lc.State(), ContainerID: r.id, Reason: r.lc.Reason()}
	if r.exit != nil {
		s.Exited, s.ExitCode, s.OOMKilled, s.External = true, r.exit.Code, r.exit.OOMKilled, r.external
	}
	s.Quota = quotaReason(r.over)
	return s
}

// PluginToHost maps an address the plugin advertises (inside the container)
// to the host path of the same socket.
func (r *containerRunner) PluginToHost(pluginNet, pluginAddr string) (string, string, error) {
	if pluginNet != "unix" {
		return "", "", fmt.Errorf("sandbox %s: plugin advertised %s address %q; only unix sockets cross the sandbox", r.spec.Name, pluginNet, pluginAddr)
	}
	rel, ok := strings.CutPrefix(pluginAddr, GuestSocketDir+"/")
	if !ok || strings.Contains(rel, "/") || rel == "" || rel == "." || rel == ".." {
		return "", "", fmt.Errorf("sandbox %s: plugin advertised socket %q outside %s", r.spec.Name, pluginAddr, GuestSocketDir)
	}
	if r.sockTmpfs {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.guest == nil {
			return "", "", fmt.Errorf("sandbox %s: its socket directory is closed", r.spec.Name)
		}
		addr, err := r.guest.dial(rel)
		if err != nil {
			return "", "", fmt.Errorf("sandbox %s: %w", r.spec.Name, err)
		}
		return "unix", addr, nil
	}
	return "unix", filepath.Join(r.hostSock, rel), nil
}

// HostToPlugin maps a host socket in the plugin's socket directory to the
// path the plugin sees.
func (r *containerRunner) HostToPlugin(hostNet, hostAddr string) (string, string, error) {
	if hostNet != "unix" {
		return "", "", fmt.Errorf("sandbox %s: cannot hand %s address %q to a sandboxed plugin", r.spec.Name, hostNet, hostAddr)
	}
	if r.sockTmpfs {
		// The broker is multiplexed over the one connection: the plugin
		// never dials a host socket, and could not see one in its tmpfs.
		return "", "", fmt.Errorf("sandbox %s: host socket %q is not in the plugin's socket directory (a tmpfs of its own)", r.spec.Name, hostAddr)
	}
	rel, err := filepath.Rel(r.hostSock, hostAddr)
	if err != nil || strings.HasPrefix(rel, "..") || strings.Contains(rel, "/") {
		return "", "", fmt.Errorf("sandbox %s: host socket %q is outside the plugin's socket directory", r.spec.Name, hostAddr)
	}
	return "unix", GuestSocketDir + "/" + rel, nil
}

func exitOf(s Status) rt.Exit { return rt.Exit{Code: s.ExitCode, OOMKilled: s.OOMKilled} }

// ExitError explains an exited sandbox (out of memory, non-zero exit) as a
// structured error, or returns nil while it runs or after a clean exit.
func (s Status) ExitError(name string, l Limits) error {
	if !s.Exited {
		return nil
	}
	return exitError(name, l, exitOf(s), s.External, s.Quota)
}
