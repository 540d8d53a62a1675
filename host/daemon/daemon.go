package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Method serves one IPC method.
type Method func(ctx context.Context, req *ipc.Request) (any, error)

// Paths of one project's kernel under $FLUFFY_HOME. They are short on
// purpose: a unix socket path may not exceed 108 bytes.
type Paths struct {
	Socket string
	Lock   string
	Log    string
}

// PathsFor derives the kernel paths of a project from its absolute path.
func PathsFor(home, project string) Paths {
	sum := sha256.Sum256([]byte(filepath.Clean(project)))
	id := hex.EncodeToString(sum[:])[:16]
	dir := filepath.Join(home, "k")
	return Paths{Socket: filepath.Join(dir, id+".sock"), Lock: filepath.Join(dir, id+".lock"), Log: filepath.Join(dir, id+".log")}
}

// Options configure a daemon.
type Options struct {
	Home    string
	Project string
	Logger  hclog.Logger
	// IdleTimeout: exit after this long with no client and no busy method
	// (0: never).
	IdleTimeout time.Duration
	// Status is merged into the kernel.status answer (kernel id, sandbox,
	// whether it runs in L1, ...).
	Status map[string]any
	// OnRefused hears refused IPC peers (audited by the caller).
	OnRefused func(p ipc.Peer, reason string)
}

// Daemon is a running kernel process's IPC front.
type Daemon struct {
	o       Options
	paths   Paths
	log     hclog.Logger
	lock    *os.File
	started time.Time

	mu      sync.Mutex
	methods map[string]Method
	clients int
	busy    int
	idle    *time.Timer
	stop    context.CancelFunc
}

// New takes the project's kernel lock (one kernel per project) and
// registers the built-in methods. It fails with KERNEL_RUNNING when another
// kernel holds the lock.
func New(o Options) (*Daemon, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	abs, err := filepath.Abs(o.Project)
	if err != nil {
		return nil, err
	}
	o.Project = abs
	p := PathsFor(o.Home, abs)
	if err := os.MkdirAll(filepath.Dir(p.Lock), 0o700); err != nil {
		return nil, fmt.Errorf("kernel dir: %w", err)
	}
	f, err := os.OpenFile(p.Lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kernel lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, uerr.New("KERNEL_RUNNING", "a fluffy kernel already runs for "+abs,
			"one kernel serves one project", "attach to it with `fluffy attach` (or just run `fluffy` in the project)")
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	d := &Daemon{o: o, paths: p, log: o.Logger.Named("daemon"), lock: f, started: time.Now(), methods: map[string]Method{}}
	d.Handle("kernel.status", d.status)
	d.Handle("kernel.shutdown", func(ctx context.Context, _ *ipc.Request) (any, error) {
		d.Shutdown()
		return true, nil
	})
	return d, nil
}

// Shutdown makes Serve return shortly, after the method calling it has
// answered.
func (d *Daemon) Shutdown() {
	d.mu.Lock()
	stop := d.stop
	d.mu.Unlock()
	if stop != nil {
		time.AfterFunc(50*time.Millisecond, stop)
	}
}

// Paths returns the daemon's socket, lock and log paths.
func (d *Daemon) Paths() Paths { return d.paths }

// Handle registers (or replaces) a method.
func (d *Daemon) Handle(name string, m Method) {
	d.mu.Lock()
	d.methods[name] = m
	d.mu.Unlock()
}

func (d *Daemon) status(context.Context, *ipc.Request) (any, error) { return d.Status() }

// Status describes the daemon (project, pid, uptime, clients, methods, and
// Options.Status).
func (d *Daemon) Status() (map[string]any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := map[string]any{
		"project": d.o.Project, "pid": os.Getpid(), "started": d.started.UTC().Format(time.RFC3339),
		"uptime_ms": time.Since(d.started).Milliseconds(), "clients": d.clients,
	}
	names := make([]string, 0, len(d.methods))
	for n := range d.methods {
		names = append(names, n)
	}
	sort.Strings(names)
	st["methods"] = names
	for k, v := range d.o.Status {
		st[k] = v
	}
	return st, nil
}

// ServeIPC implements ipc.Handler: dispatch by method name.
func (d *Daemon) ServeIPC(ctx context.Context, req *ipc.Request) (any, error) {
	d.mu.Lock()
	m := d.methods[req.Method]
	if m != nil {
		d.busy++
		d.touchLocked()
	}
	d.mu.Unlock()
	if m == nil {
		return nil, uerr.New(ipc.CodeUnknownMethod, fmt.Sprintf("the kernel has no method %q", req.Method),
			"the client and the kernel may be different fluffy versions", "restart the kernel (`fluffy kernel stop`) so the current version runs")
	}
	defer func() {
		d.mu.Lock()
		d.busy--
		d.touchLocked()
		d.mu.Unlock()
	}()
	return m(ctx, req)
}

// Busy marks background work (a task that outlives its request) so the
// daemon does not exit idle under it; call the returned func when done.
func (d *Daemon) Busy() func() {
	d.mu.Lock()
	d.busy++
	d.touchLocked()
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			d.busy--
			d.touchLocked()
			d.mu.Unlock()
		})
	}
}

// touchLocked re-arms the idle timer when nothing holds the daemon.
func (d *Daemon) touchLocked() {
	if d.o.IdleTimeout <= 0 || d.stop == nil {
		return
	}
	if d.idle != nil {
		d.idle.Stop()
	}
	if d.clients == 0 && d.busy == 0 {
		stop := d.stop
		d.idle = time.AfterFunc(d.o.IdleTimeout, func() {
			d.log.Info("idle; exiting", "after", d.o.IdleTimeout)
			stop()
		})
	}
}

// Serve listens on the project's socket until ctx ends, kernel.shutdown
// is called, or the daemon is idle past its timeout.
func (d *Daemon) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l, err := ipc.Listen(d.paths.Socket)
	if err != nil {
		return err
	}
	defer os.Remove(d.paths.Socket)
	d.mu.Lock()
	d.stop = cancel
	d.touchLocked()
	d.mu.Unlock()
	srv := &ipc.Server{Handler: d, Logger: d.log, OnRefused: d.o.OnRefused, ConnState: func(_ ipc.Peer, open bool) {
		d.mu.Lock()
		if open {
			d.clients++
		} else {
			d.clients--
		}
		d.touchLocked()
		d.mu.Unlock()
	}}
	return srv.Serve(ctx, l)
}

// Close releases the project lock.
func (d *Daemon) Close() error {
	d.mu.Lock()
	if d.idle != nil {
		d.idle.Stop()
	}
	d.mu.Unlock()
	return d.lock.Close()
}

// Decode unmarshals a request's params into v with a structured error.
func Decode(req *ipc.Request, v any) error {
	if len(req.Params) == 0 {
		return nil
	}
	if err := json.Unmarshal(req.Params, v); err != nil {
		return uerr.New("IPC_BAD_PARAMS", "bad parameters for "+req.Method, err.Error(), "use a fluffy client of the same version as the kernel")
	}
	return nil
}
