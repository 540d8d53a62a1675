package runtime

import (
	"context"
	"io"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/base"
)

// PluginName is the key under which a runtime plugin is dispensed.
const PluginName = "runtime"

// MountType says what a Mount's Source names.
type MountType int

const (
	MountBind MountType = iota
	MountVolume
	MountTmpfs
)

// Mount is one filesystem mount of a container.
//
// A MountVolume with no Source and a TmpfsSize is an anonymous volume
// backed by a tmpfs of that size (mode TmpfsMode, owned by Spec.User,
// nosuid, nodev, noexec): a write past its size fails with ENOSPC in the
// container, and Archiver.CopyFrom can read it (an engine cannot archive a
// plain MountTmpfs). Remove with volumes=true deletes it.
type Mount struct {
	Type      MountType
	Source    string // host path (bind) or volume name
	Target    string
	ReadOnly  bool
	TmpfsSize int64
	TmpfsMode string // octal, e.g. "1777"
	// TmpfsExec allows executing files from the tmpfs; tmpfs mounts are
	// noexec otherwise.
	TmpfsExec bool
}

// Spec is everything an adapter needs to create one container. The sandbox
// package fills it; an adapter applies it as given and adds nothing.
type Spec struct {
	Name            string
	Image           string
	Cmd             []string
	Env             []string
	User            string // "uid:gid"
	GroupAdd        []string
	WorkingDir      string
	Labels          map[string]string
	Mounts          []Mount
	NetworkMode     string // "none" or an engine network name
	MemoryBytes     int64
	NanoCPUs        int64
	PidsLimit       int64
	ReadOnlyRootfs  bool
	NoNewPrivileges bool
	CapDrop         []string
	SeccompJSON     string // a complete profile; "" = engine default
	OCIRuntime      string // "" = engine default, or "runsc"
	AutoRemove      bool
	// OpenStdin keeps stdin open while an attachment exists; the engine
	// closes it when the attachment ends.
	OpenStdin   bool
	LogMaxBytes int64
	Init        bool
}

// State is a container as the engine reports it.
type State struct {
	ID        string
	Name      string
	Image     string
	Status    string // created, running, paused, exited, dead, removing
	Running   bool
	Paused    bool
	OOMKilled bool
	ExitCode  int64
	Pid       int64
	Created   time.Time
	Started   time.Time
	Finished  time.Time
	Labels    map[string]string
	Error     string
	// Config is the engine's record of how the container was created.
	// Inspect fills it, List does not.
	Config Config
}

// Config is what the engine applies to a container, as the engine records
// it (which may differ from the Spec that was asked for): the conformance
// suite and CORE-SANDBOX-001 judge containers by it, so an adapter reports
// the engine's answer, never the spec.
type Config struct {
	User           string
	NetworkMode    string
	MemoryBytes    int64
	PidsLimit      int64 // 0: no limit
	ReadOnlyRootfs bool
	CapDrop        []string
	CapAdd         []string
	SecurityOpt    []string
	OCIRuntime     string
	Mounts         []RecordedMount
}

// RecordedMount is one mount of a container as the engine records it.
type RecordedMount struct {
	Type   string // "bind", "volume", "tmpfs", ...
	Name   string // volume name
	Source string
	Target string
}

// Exit is how a container ended.
type Exit struct {
	Code      int64
	OOMKilled bool
	Error     string
}

// PingInfo describes the engine an adapter talks to.
type PingInfo struct {
	Engine        string
	APIVersion    string
	Runtimes      []string
	CgroupVersion string
}

// Volume is an engine volume.
type Volume struct {
	Name       string
	Mountpoint string
	Labels     map[string]string
}

// Stream names an output stream of a container.
type Stream int

const (
	Stdout Stream = iota
	Stderr
)

// OutputFunc receives container output. Returning an error ends the stream.
type OutputFunc func(s Stream, data []byte) error

// Engine is the container-runtime abstraction, minus `run` (exec into a sandbox), which the
// default policy denies and fluffy does not offer.
//
// Idempotency (checked by conformance item RUNTIME-LIFECYCLE-001): a second
// Start of a running container, Stop of a stopped one, and Remove of a
// removed one return nil — absence is reported only by Inspect. A second
// Create with the same name may fail but must never make a second container.
type Engine interface {
	// Ping fails with a *uerr.Error (code RUNTIME_UNREACHABLE) when the
	// engine does not answer.
	Ping(ctx context.Context) (PingInfo, error)
	PrepareImage(ctx context.Context, ref string, rootfsTar []byte, labels map[string]string) (created bool, err error)
	Create(ctx context.Context, spec Spec) (id string, err error)
	// Attach streams the container's output to out until it closes or ctx
	// ends. attached is called once the attachment is in place; call Start
	// after that to miss no output. Ending the attachment closes stdin.
	Attach(ctx context.Context, id string, attached func(), out OutputFunc) error
	Start(ctx context.Context, id string) error
	Stop(ctx context.Context, id string, timeout time.Duration) error
	// Kill sends signal ("" = SIGKILL).
	Kill(ctx context.Context, id string, signal string) error
	Remove(ctx context.Context, id string, force, volumes bool) error
	// Inspect returns found=false (and no error) for an unknown container.
	Inspect(ctx context.Context, id string) (st State, found bool, err error)
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	Wait(ctx context.Context, id string) (Exit, error)
	Logs(ctx context.Context, id string, follow bool, tail int64, out OutputFunc) error
	// List returns containers whose labels match every entry of labels (an
	// empty value only requires the key).
	List(ctx context.Context, labels map[string]string, all bool) ([]State, error)
	CreateVolume(ctx context.Context, name string, labels map[string]string) (Volume, error)
	RemoveVolume(ctx context.Context, name string, force bool) error
	ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error)
}

// Archiver is what an adapter offers besides Engine to read files out of
// a container: a tar archive of path inside container id, as the engine
// makes it (its size is whatever the container holds there: the caller
// bounds what it reads). runtime-docker implements it; the kernel uses it
// to copy a sandbox's size-limited /out to the host.
type Archiver interface {
	CopyFrom(ctx context.Context, id, path string) (io.ReadCloser, error)
}

// Plugin is what a runtime adapter implements.
type Plugin interface {
	base.Plugin
	Engine
}

// Client is the kernel's view of a running runtime adapter.
type Client interface {
	APIVersion() int
	Info(ctx context.Context) (base.Info, error)
	Configure(ctx context.Context, cfg base.Config, kernel base.KernelServer) error
	Health(ctx context.Context) error
	Engine
}
