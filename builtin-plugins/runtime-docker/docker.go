package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/runtime"
)

const (
	pluginName    = "runtime-docker"
	pluginVersion = "0.1.0"
)

// adapter implements runtime.Plugin over the Docker Engine API.
type adapter struct {
	mu  sync.Mutex
	cli *client.Client
	// socketPath is the engine's unix socket on this side (refused as a
	// bind-mount source).
	socketPath string
}

func newAdapter() *adapter { return &adapter{} }

func (a *adapter) Info() base.Info {
	return base.Info{Name: pluginName, Kind: base.KindRuntime, Version: pluginVersion, APIVersions: base.SupportedAPIVersions()}
}

func (a *adapter) Configure(context.Context, base.Config, base.KernelClient) error { return nil }

func (a *adapter) Health(ctx context.Context) error {
	_, err := a.Ping(ctx)
	return err
}

// client connects lazily so the adapter can report an unreachable engine
// through Ping instead of failing its handshake.
func (a *adapter) client() (*client.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cli != nil {
		return a.cli, nil
	}
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	if p, ok := strings.CutPrefix(host, "unix://"); ok {
		a.socketPath = p
	}
	c, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", host, err)
	}
	a.cli = c
	return c, nil
}

func unreachable(err error) error {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	return uerr.Wrap(err, "RUNTIME_UNREACHABLE", "the container engine at "+textsafe.Line(host, 200)+" does not answer", textsafe.Text(err.Error(), maxEngineError),
		"start Docker and check that this user may use its socket")
}

func (a *adapter) Ping(ctx context.Context) (runtime.PingInfo, error) {
	c, err := a.client()
	if err != nil {
		return runtime.PingInfo{}, unreachable(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := c.Ping(ctx); err != nil {
		return runtime.PingInfo{}, unreachable(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return runtime.PingInfo{}, unreachable(err)
	}
	rts := make([]string, 0, len(info.Runtimes))
	for n := range info.Runtimes {
		rts = append(rts, n)
	}
	sort.Strings(rts)
	return runtime.PingInfo{
		Engine:        "docker " + info.ServerVersion,
		APIVersion:    c.ClientVersion(),
		Runtimes:      rts,
		CgroupVersion: info.CgroupVersion,
	}, nil
}

func (a *adapter) PrepareImage(ctx context.Context, ref string, tarball []byte, labels map[string]string) (bool, error) {
	c, err := a.client()
	if err != nil {
		return false, err
	}
	if _, err := c.ImageInspect(ctx, ref); err == nil {
		return false, nil
	} else if !isNotFound(err) {
		return false, engineErr("inspect image", ref, err)
	}
	var changes []string
	for k, v := range labels {
		changes = append(changes, fmt.Sprintf("LABEL %s=%q", k, v))
	}
	sort.Strings(changes)
	rc, err := c.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(tarball), SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		return false, engineErr("import image", ref, err)
	}
	defer rc.Close()
	out, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	if bytes.Contains(out, []byte(`"error"`)) {
		return false, fmt.Errorf("import image %s: %s", ref, textsafe.Text(string(out), maxEngineError))
	}
	return true, nil
}

// maxEngineError bounds the engine's text in an error: the engine may quote
// what it was sent (a 6 KB seccomp profile, a label), and the error ends up
// on a terminal and in logs.
const maxEngineError = 1000

// boundedErr is an engine error whose text is bounded and escaped; it still
// unwraps to the engine's error.
type boundedErr struct {
	msg string
	err error
}

func (e boundedErr) Error() string { return e.msg }
func (e boundedErr) Unwrap() error { return e.err }

// engineErr wraps the engine's err for the operation op on subject.
func engineErr(op, subject string, err error) error {
	return boundedErr{msg: op + " " + textsafe.Line(subject, 200) + ": " + textsafe.Text(err.Error(), maxEngineError), err: err}
}

func isNotFound(err error) bool {
	return err != nil && (client.IsErrNotFound(err) || strings.Contains(err.Error(), "No such"))
}

// checkSpec refuses specs that would hand the engine socket to a container.
func (a *adapter) checkSpec(s runtime.Spec) error {
	for _, m := range s.Mounts {
		if m.Type != runtime.MountBind {
			continue
		}
		src := filepath.Clean(m.Source)
		for _, sock := range []string{a.socketPath, "/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock"} {
			if sock == "" {
				continue
			}
			if src == sock || strings.HasPrefix(sock, src+"/") || src == "/" {
				return uerr.New("RUNTIME_SPEC_REFUSED", "refused to create container "+s.Name,
					"its mount "+m.Source+" would expose the container engine socket "+sock,
					"this is a bug in the caller; L2 sandboxes never get the engine socket")
			}
		}
	}
	return nil
}

func (a *adapter) Create(ctx context.Context, s runtime.Spec) (string, error) {
	c, err := a.client()
	if err != nil {
		return "", err
	}
	if err := a.checkSpec(s); err != nil {
		return "", err
	}
	cfg := &container.Config{
		Image:           s.Image,
		Cmd:             s.Cmd,
		Env:             s.Env,
		User:            s.User,
		WorkingDir:      s.WorkingDir,
		Labels:          s.Labels,
		AttachStdout:    true,
		AttachStderr:    true,
		NetworkDisabled: s.NetworkMode == "none",
	}
	if s.OpenStdin {
		cfg.OpenStdin, cfg.StdinOnce, cfg.AttachStdin = true, true, true
	}
	pids := s.PidsLimit
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(s.NetworkMode),
		ReadonlyRootfs: s.ReadOnlyRootfs,
		CapDrop:        s.CapDrop,
		GroupAdd:       s.GroupAdd,
		AutoRemove:     s.AutoRemove,
		Runtime:        s.OCIRuntime,
		Resources:      container.Resources{Memory: s.MemoryBytes},
	}
	hc.Resources.CPUPeriod, hc.Resources.CPUQuota = cpuQuota(s.NanoCPUs)
	if s.MemoryBytes > 0 {
		hc.Resources.MemorySwap = s.MemoryBytes // no swap beyond the limit
	}
	if pids > 0 {
		hc.Resources.PidsLimit = &pids
	}
	if s.Init {
		t := true
		hc.Init = &t
	}
	if s.NoNewPrivileges {
		hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges:true")
	}
	if s.SeccompJSON != "" {
		hc.SecurityOpt = append(hc.SecurityOpt, "seccomp="+s.SeccompJSON)
	}
	if s.LogMaxBytes > 0 {
		hc.LogConfig = container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": fmt.Sprintf("%dk", max(1, s.LogMaxBytes/1024)), "max-file": "1"}}
	}
	for _, m := range s.Mounts {
		switch m.Type {
		case runtime.MountBind:
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly,
				BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
		case runtime.MountVolume:
			mm := mount.Mount{Type: mount.TypeVolume, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}
			if m.Source == "" && m.TmpfsSize > 0 {
				mm.VolumeOptions = tmpfsVolume(m, s.User)
			}
			hc.Mounts = append(hc.Mounts, mm)
		case runtime.MountTmpfs:
			opt := fmt.Sprintf("size=%d", m.TmpfsSize)
			if m.TmpfsMode != "" {
				opt += ",mode=" + m.TmpfsMode
			}
			if hc.Tmpfs == nil {
				hc.Tmpfs = map[string]string{}
			}
			exec := "noexec"
			if m.TmpfsExec {
				exec = "exec"
			}
			hc.Tmpfs[m.Target] = "rw," + exec + ",nosuid,nodev," + opt
		}
	}
	r, err := c.ContainerCreate(ctx, cfg, hc, nil, nil, s.Name)
	if err != nil {
		return "", engineErr("create container", s.Name, err)
	}
	return r.ID, nil
}

// tmpfsVolume is the local driver's options for an anonymous volume backed
// by a size-limited tmpfs owned by user ("uid:gid"). Unlike a tmpfs mount,
// the engine mounts such a volume itself, so CopyFromContainer can read it.
func tmpfsVolume(m runtime.Mount, user string) *mount.VolumeOptions {
	o := fmt.Sprintf("size=%d,nosuid,nodev,noexec", m.TmpfsSize)
	if m.TmpfsMode != "" {
		o += ",mode=" + m.TmpfsMode
	}
	if uid, gid, ok := strings.Cut(user, ":"); ok && numeric(uid) && numeric(gid) {
		o += ",uid=" + uid + ",gid=" + gid
	}
	return &mount.VolumeOptions{NoCopy: true, DriverConfig: &mount.Driver{Name: "local",
		Options: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": o}}}
}

func numeric(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// CopyFrom implements runtime.Archiver: the engine's tar archive of path
// inside container id.
func (a *adapter) CopyFrom(ctx context.Context, id, path string) (io.ReadCloser, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	rc, _, err := c.CopyFromContainer(ctx, id, path)
	if err != nil {
		return nil, engineErr("copy from", id+":"+path, err)
	}
	return rc, nil
}

// frameWriter forwards demultiplexed output to an OutputFunc.
type frameWriter struct {
	s   runtime.Stream
	out runtime.OutputFunc
}

func (w frameWriter) Write(p []byte) (int, error) {
	if err := w.out(w.s, bytes.Clone(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (a *adapter) Attach(ctx context.Context, id string, attached func(), out runtime.OutputFunc) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	insp, err := c.ContainerInspect(ctx, id)
	if err != nil {
		return engineErr("attach", id, err)
	}
	hj, err := c.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdout: true, Stderr: true, Stdin: insp.Config.OpenStdin})
	if err != nil {
		return engineErr("attach", id, err)
	}
	defer hj.Close()
	stop := context.AfterFunc(ctx, hj.Close)
	defer stop()
	attached()
	_, err = stdcopy.StdCopy(frameWriter{runtime.Stdout, out}, frameWriter{runtime.Stderr, out}, hj.Reader)
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

func (a *adapter) Start(ctx context.Context, id string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	if err := c.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return engineErr("start", id, err)
	}
	return nil
}

func (a *adapter) Stop(ctx context.Context, id string, timeout time.Duration) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	secs := int(timeout.Seconds())
	if err := c.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}); err != nil && !isNotFound(err) {
		return engineErr("stop", id, err)
	}
	return nil
}

func (a *adapter) Kill(ctx context.Context, id, signal string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	if signal == "" {
		signal = "SIGKILL"
	}
	if err := c.ContainerKill(ctx, id, signal); err != nil && !isNotFound(err) && !strings.Contains(err.Error(), "is not running") {
		return engineErr("kill", id, err)
	}
	return nil
}

func (a *adapter) Remove(ctx context.Context, id string, force, volumes bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	err = c.ContainerRemove(ctx, id, container.RemoveOptions{Force: force, RemoveVolumes: volumes})
	if err != nil && !isNotFound(err) && !strings.Contains(err.Error(), "already in progress") {
		return engineErr("remove", id, err)
	}
	return nil
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() < 2000 {
		return time.Time{}
	}
	return t
}

func (a *adapter) Inspect(ctx context.Context, id string) (runtime.State, bool, error) {
	c, err := a.client()
	if err != nil {
		return runtime.State{}, false, err
	}
	r, err := c.ContainerInspect(ctx, id)
	if isNotFound(err) {
		return runtime.State{}, false, nil
	}
	if err != nil {
		return runtime.State{}, false, engineErr("inspect", id, err)
	}
	st := runtime.State{ID: r.ID, Name: strings.TrimPrefix(r.Name, "/"), Created: parseTime(r.Created)}
	if r.Config != nil {
		st.Labels, st.Image = r.Config.Labels, r.Config.Image
		st.Config.User = r.Config.User
	}
	if hc := r.HostConfig; hc != nil {
		st.Config.NetworkMode, st.Config.MemoryBytes = string(hc.NetworkMode), hc.Memory
		if hc.PidsLimit != nil && *hc.PidsLimit > 0 {
			st.Config.PidsLimit = *hc.PidsLimit
		}
		st.Config.ReadOnlyRootfs, st.Config.OCIRuntime = hc.ReadonlyRootfs, hc.Runtime
		st.Config.CapDrop, st.Config.CapAdd, st.Config.SecurityOpt = hc.CapDrop, hc.CapAdd, hc.SecurityOpt
	}
	for _, m := range r.Mounts {
		st.Config.Mounts = append(st.Config.Mounts, runtime.RecordedMount{Type: string(m.Type), Name: m.Name, Source: m.Source, Target: m.Destination})
	}
	if s := r.State; s != nil {
		st.Status, st.Running, st.Paused, st.OOMKilled = s.Status, s.Running, s.Paused, s.OOMKilled
		st.ExitCode, st.Pid, st.Error = int64(s.ExitCode), int64(s.Pid), s.Error
		st.Started, st.Finished = parseTime(s.StartedAt), parseTime(s.FinishedAt)
	}
	return st, true, nil
}

func (a *adapter) Pause(ctx context.Context, id string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	return c.ContainerPause(ctx, id)
}

func (a *adapter) Resume(ctx context.Context, id string) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	return c.ContainerUnpause(ctx, id)
}

func (a *adapter) Wait(ctx context.Context, id string) (runtime.Exit, error) {
	c, err := a.client()
	if err != nil {
		return runtime.Exit{}, err
	}
	resC, errC := c.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	var ex runtime.Exit
	select {
	case r := <-resC:
		ex.Code = r.StatusCode
		if r.Error != nil {
			ex.Error = r.Error.Message
		}
	case err := <-errC:
		if isNotFound(err) {
			return runtime.Exit{Code: -1, Error: "container is gone"}, nil
		}
		return runtime.Exit{}, engineErr("wait", id, err)
	}
	// OOMKilled is only in the container's state; it may be gone (auto-remove).
	if st, found, err := a.Inspect(ctx, id); err == nil && found {
		ex.OOMKilled = st.OOMKilled
	}
	return ex, nil
}

func (a *adapter) Logs(ctx context.Context, id string, follow bool, tail int64, out runtime.OutputFunc) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow}
	if tail > 0 {
		opts.Tail = fmt.Sprint(tail)
	}
	rc, err := c.ContainerLogs(ctx, id, opts)
	if err != nil {
		return engineErr("logs", id, err)
	}
	defer rc.Close()
	_, err = stdcopy.StdCopy(frameWriter{runtime.Stdout, out}, frameWriter{runtime.Stderr, out}, rc)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func labelFilter(labels map[string]string) filters.Args {
	f := filters.NewArgs()
	for k, v := range labels {
		if v == "" {
			f.Add("label", k)
		} else {
			f.Add("label", k+"="+v)
		}
	}
	return f
}

func (a *adapter) List(ctx context.Context, labels map[string]string, all bool) ([]runtime.State, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	cs, err := c.ContainerList(ctx, container.ListOptions{All: all, Filters: labelFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]runtime.State, 0, len(cs))
	for _, x := range cs {
		name := ""
		if len(x.Names) > 0 {
			name = strings.TrimPrefix(x.Names[0], "/")
		}
		out = append(out, runtime.State{ID: x.ID, Name: name, Image: x.Image, Status: x.State,
			Running: x.State == "running", Paused: x.State == "paused", Labels: x.Labels, Created: time.Unix(x.Created, 0)})
	}
	return out, nil
}

func (a *adapter) CreateVolume(ctx context.Context, name string, labels map[string]string) (runtime.Volume, error) {
	c, err := a.client()
	if err != nil {
		return runtime.Volume{}, err
	}
	v, err := c.VolumeCreate(ctx, volume.CreateOptions{Name: name, Labels: labels})
	if err != nil {
		return runtime.Volume{}, engineErr("create volume", name, err)
	}
	return runtime.Volume{Name: v.Name, Mountpoint: v.Mountpoint, Labels: v.Labels}, nil
}

func (a *adapter) RemoveVolume(ctx context.Context, name string, force bool) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	if err := c.VolumeRemove(ctx, name, force); err != nil && !isNotFound(err) {
		return engineErr("remove volume", name, err)
	}
	return nil
}

func (a *adapter) ListVolumes(ctx context.Context, labels map[string]string) ([]runtime.Volume, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	r, err := c.VolumeList(ctx, volume.ListOptions{Filters: labelFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	out := make([]runtime.Volume, 0, len(r.Volumes))
	for _, v := range r.Volumes {
		out = append(out, runtime.Volume{Name: v.Name, Mountpoint: v.Mountpoint, Labels: v.Labels})
	}
	return out, nil
}

// cpuPeriod is the CFS period (µs) a CPU limit is enforced over. Docker's
// NanoCPUs uses the kernel default of 100 ms: a plugin limited to 0.5 CPU
// that spends its 50 ms quota in a burst (a provider relaying a streamed
// answer) is stopped for the rest of the period, which showed as a ~50 ms
// p99 on a provider turn (docs/decisions/cpu-limit-short-cfs-periods.md). The same
// share over 10 ms periods bounds such a stall to a few ms; the limit (the
// share of a CPU) is unchanged.
const cpuPeriod = 10_000

// cpuQuota is the CFS period and quota (µs) of a limit of nano
// billionths of a CPU (rt.Spec.NanoCPUs); 0, 0 (no limit) when nano <= 0.
// Below 0.1 CPU the quota would fall under the kernel's minimum of 1 ms:
// the period grows instead, so the share stays exact.
func cpuQuota(nano int64) (period, quota int64) {
	if nano <= 0 {
		return 0, 0
	}
	if q := nano * cpuPeriod / 1e9; q >= 1000 {
		return cpuPeriod, q
	}
	return min(1000*1e9/nano, 1_000_000), 1000
}
