package runtime

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	rtpb "github.com/fluffy-waffle/fluffy/plugins/runtime/proto"
)

// PluginSets returns the go-plugin version map for a runtime implementation
// (nil impl: the kernel side). The one service serves every API version.
func PluginSets(impl Plugin, versions []int) map[int]plugin.PluginSet {
	return base.SharedPluginSets(PluginName, impl, versions,
		func(s *grpc.Server, impl Plugin) {
			rtpb.RegisterRuntimeServer(s, &server{impl: impl})
			if a, ok := impl.(Archiver); ok {
				rtpb.RegisterRuntimeArchiveServer(s, &archiveServer{impl: a})
			}
		},
		func(bc *base.Client, conn *grpc.ClientConn) any {
			return &client{Client: bc, c: rtpb.NewRuntimeClient(conn), a: rtpb.NewRuntimeArchiveClient(conn)}
		})
}

// ---- server side ----

type archiveServer struct {
	rtpb.UnimplementedRuntimeArchiveServer
	impl Archiver
}

// archiveChunk is how much of an archive one message carries.
const archiveChunk = 256 << 10

func (s *archiveServer) CopyFrom(r *rtpb.CopyFromRequest, stream rtpb.RuntimeArchive_CopyFromServer) error {
	rc, err := s.impl.CopyFrom(stream.Context(), r.GetId(), r.GetPath())
	if err != nil {
		return err
	}
	defer rc.Close()
	buf := make([]byte, archiveChunk)
	for {
		n, err := io.ReadFull(rc, buf)
		if n > 0 {
			if serr := stream.Send(&rtpb.ArchiveChunk{Data: buf[:n]}); serr != nil {
				return serr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

type server struct {
	rtpb.UnimplementedRuntimeServer
	impl Plugin
}

func (s *server) Ping(ctx context.Context, _ *rtpb.PingRequest) (*rtpb.PingResponse, error) {
	pi, err := s.impl.Ping(ctx)
	if err != nil {
		return &rtpb.PingResponse{Ok: false, Error: base.ErrorToProto(err)}, nil
	}
	return &rtpb.PingResponse{Ok: true, Engine: pi.Engine, ApiVersion: pi.APIVersion, Runtimes: pi.Runtimes, CgroupVersion: pi.CgroupVersion}, nil
}

func (s *server) PrepareImage(ctx context.Context, r *rtpb.PrepareImageRequest) (*rtpb.PrepareImageResponse, error) {
	created, err := s.impl.PrepareImage(ctx, r.GetRef(), r.GetRootfsTar(), r.GetLabels())
	if err != nil {
		return nil, err
	}
	return &rtpb.PrepareImageResponse{Created: created}, nil
}

func (s *server) Create(ctx context.Context, r *rtpb.CreateRequest) (*rtpb.CreateResponse, error) {
	id, err := s.impl.Create(ctx, specFromProto(r.GetSpec()))
	if err != nil {
		return nil, err
	}
	return &rtpb.CreateResponse{Id: id}, nil
}

func (s *server) Attach(r *rtpb.AttachRequest, stream rtpb.Runtime_AttachServer) error {
	return s.impl.Attach(stream.Context(), r.GetId(),
		func() { _ = stream.Send(&rtpb.OutputFrame{Stream: rtpb.OutputFrame_ATTACHED}) },
		func(st Stream, data []byte) error {
			return stream.Send(&rtpb.OutputFrame{Stream: rtpb.OutputFrame_Stream(st), Data: data})
		})
}

func (s *server) Start(ctx context.Context, r *rtpb.IDRequest) (*rtpb.Empty, error) {
	return &rtpb.Empty{}, s.impl.Start(ctx, r.GetId())
}

func (s *server) Stop(ctx context.Context, r *rtpb.StopRequest) (*rtpb.Empty, error) {
	return &rtpb.Empty{}, s.impl.Stop(ctx, r.GetId(), time.Duration(r.GetTimeoutMs())*time.Millisecond)
}

func (s *server) Kill(ctx context.Context, r *rtpb.KillRequest) (*rtpb.Empty, error) {
	return &rtpb.Empty{}, s.impl.Kill(ctx, r.GetId(), r.GetSignal())
}

func (s *server) Remove(ctx context.Context, r *rtpb.RemoveRequest) (*rtpb.Empty, error) {
	return &rtpb.Empty{}, s.impl.Remove(ctx, r.GetId(), r.GetForce(), r.GetVolumes())
}

func (s *server) Inspect(ctx context.Context, r *rtpb.IDRequest) (*rtpb.InspectResponse, error) {
	st, found, err := s.impl.Inspect(ctx, r.GetId())
	if err != nil {
		return nil, err
	}
	if !found {
		return &rtpb.InspectResponse{}, nil
	}
	return &rtpb.InspectResponse{Found: true, State: stateToProto(st)}, nil
}

func (s *server) Pause(ctx context.Context, r *rtpb.IDRequest) (*rtpb.Empty, error) {
	return &rtpb.Empty{}, s.impl.Pause(ctx, r.GetId())
}

func (s *server) Resume(ctx context.Context, r *rtpb.IDRequest) (*rtpb.Empty, error) {
	return &rtpb.Empty{}, s.impl.Resume(ctx, r.GetId())
}

func (s *server) Wait(ctx context.Context, r *rtpb.IDRequest) (*rtpb.WaitResponse, error) {
	ex, err := s.impl.Wait(ctx, r.GetId())
	if err != nil {
		return nil, err
	}
	return &rtpb.WaitResponse{ExitCode: ex.Code, OomKilled: ex.OOMKilled, Error: ex.Error}, nil
}

func (s *server) Logs(r *rtpb.LogsRequest, stream rtpb.Runtime_LogsServer) error {
	return s.impl.Logs(stream.Context(), r.GetId(), r.GetFollow(), r.GetTail(), func(st Stream, data []byte) error {
		return stream.Send(&rtpb.OutputFrame{Stream: rtpb.OutputFrame_Stream(st), Data: data})
	})
}

func (s *server) List(ctx context.Context, r *rtpb.ListRequest) (*rtpb.ListResponse, error) {
	sts, err := s.impl.List(ctx, r.GetLabels(), r.GetAll())
	if err != nil {
		return nil, err
	}
	out := &rtpb.ListResponse{}
	for _, st := range sts {
		out.Containers = append(out.Containers, stateToProto(st))
	}
	return out, nil
}

func (s *server) CreateVolume(ctx context.Context, r *rtpb.CreateVolumeRequest) (*rtpb.CreateVolumeResponse, error) {
	v, err := s.impl.CreateVolume(ctx, r.GetName(), r.GetLabels())
	if err != nil {
		return nil, err
	}
	return &rtpb.CreateVolumeResponse{Name: v.Name, Mountpoint: v.Mountpoint}, nil
}

func (s *server) RemoveVolume(ctx context.Context, r *rtpb.RemoveVolumeRequest) (*rtpb.Empty, error) {
	return &rtpb.Empty{}, s.impl.RemoveVolume(ctx, r.GetName(), r.GetForce())
}

func (s *server) ListVolumes(ctx context.Context, r *rtpb.ListRequest) (*rtpb.ListVolumesResponse, error) {
	vs, err := s.impl.ListVolumes(ctx, r.GetLabels())
	if err != nil {
		return nil, err
	}
	out := &rtpb.ListVolumesResponse{}
	for _, v := range vs {
		out.Volumes = append(out.Volumes, &rtpb.Volume{Name: v.Name, Labels: v.Labels, Mountpoint: v.Mountpoint})
	}
	return out, nil
}

// ---- client side ----

type client struct {
	*base.Client
	c rtpb.RuntimeClient
	a rtpb.RuntimeArchiveClient
}

// CopyFrom implements Archiver. An adapter without the archive service
// answers with gRPC's Unimplemented.
func (c *client) CopyFrom(ctx context.Context, id, path string) (io.ReadCloser, error) {
	ctx, cancel := context.WithCancel(ctx)
	st, err := c.a.CopyFrom(ctx, &rtpb.CopyFromRequest{Id: id, Path: path})
	if err != nil {
		cancel()
		return nil, err
	}
	// The first chunk carries the adapter's error, if any, before the
	// caller starts reading.
	first, err := st.Recv()
	if err != nil && !errors.Is(err, io.EOF) {
		cancel()
		return nil, err
	}
	return &archiveReader{st: st, cancel: cancel, buf: first.GetData(), eof: err != nil}, nil
}

type archiveReader struct {
	st     rtpb.RuntimeArchive_CopyFromClient
	cancel context.CancelFunc
	buf    []byte
	eof    bool
}

func (r *archiveReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.eof {
			return 0, io.EOF
		}
		f, err := r.st.Recv()
		if errors.Is(err, io.EOF) {
			r.eof = true
			continue
		}
		if err != nil {
			return 0, err
		}
		r.buf = f.GetData()
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *archiveReader) Close() error { r.cancel(); return nil }

func (c *client) Ping(ctx context.Context) (PingInfo, error) {
	r, err := c.c.Ping(ctx, &rtpb.PingRequest{})
	if err != nil {
		return PingInfo{}, err
	}
	if !r.GetOk() {
		if e := base.ErrorFromProto(r.GetError()); e != nil {
			return PingInfo{}, e
		}
		return PingInfo{}, errors.New("runtime engine did not answer")
	}
	return PingInfo{Engine: r.GetEngine(), APIVersion: r.GetApiVersion(), Runtimes: r.GetRuntimes(), CgroupVersion: r.GetCgroupVersion()}, nil
}

func (c *client) PrepareImage(ctx context.Context, ref string, tar []byte, labels map[string]string) (bool, error) {
	r, err := c.c.PrepareImage(ctx, &rtpb.PrepareImageRequest{Ref: ref, RootfsTar: tar, Labels: labels})
	if err != nil {
		return false, err
	}
	return r.GetCreated(), nil
}

func (c *client) Create(ctx context.Context, spec Spec) (string, error) {
	r, err := c.c.Create(ctx, &rtpb.CreateRequest{Spec: specToProto(spec)})
	if err != nil {
		return "", err
	}
	return r.GetId(), nil
}

func (c *client) Attach(ctx context.Context, id string, attached func(), out OutputFunc) error {
	st, err := c.c.Attach(ctx, &rtpb.AttachRequest{Id: id})
	if err != nil {
		return err
	}
	return recvFrames(st, attached, out)
}

type frameStream interface {
	Recv() (*rtpb.OutputFrame, error)
}

func recvFrames(st frameStream, attached func(), out OutputFunc) error {
	for {
		f, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if f.GetStream() == rtpb.OutputFrame_ATTACHED {
			if attached != nil {
				attached()
			}
			continue
		}
		if err := out(Stream(f.GetStream()), f.GetData()); err != nil {
			return err
		}
	}
}

func (c *client) Start(ctx context.Context, id string) error {
	_, err := c.c.Start(ctx, &rtpb.IDRequest{Id: id})
	return err
}

func (c *client) Stop(ctx context.Context, id string, timeout time.Duration) error {
	_, err := c.c.Stop(ctx, &rtpb.StopRequest{Id: id, TimeoutMs: timeout.Milliseconds()})
	return err
}

func (c *client) Kill(ctx context.Context, id, signal string) error {
	_, err := c.c.Kill(ctx, &rtpb.KillRequest{Id: id, Signal: signal})
	return err
}

func (c *client) Remove(ctx context.Context, id string, force, volumes bool) error {
	_, err := c.c.Remove(ctx, &rtpb.RemoveRequest{Id: id, Force: force, Volumes: volumes})
	return err
}

func (c *client) Inspect(ctx context.Context, id string) (State, bool, error) {
	r, err := c.c.Inspect(ctx, &rtpb.IDRequest{Id: id})
	if err != nil {
		return State{}, false, err
	}
	if !r.GetFound() {
		return State{}, false, nil
	}
	return stateFromProto(r.GetState()), true, nil
}

func (c *client) Pause(ctx context.Context, id string) error {
	_, err := c.c.Pause(ctx, &rtpb.IDRequest{Id: id})
	return err
}

func (c *client) Resume(ctx context.Context, id string) error {
	_, err := c.c.Resume(ctx, &rtpb.IDRequest{Id: id})
	return err
}

func (c *client) Wait(ctx context.Context, id string) (Exit, error) {
	r, err := c.c.Wait(ctx, &rtpb.IDRequest{Id: id})
	if err != nil {
		return Exit{}, err
	}
	return Exit{Code: r.GetExitCode(), OOMKilled: r.GetOomKilled(), Error: r.GetError()}, nil
}

func (c *client) Logs(ctx context.Context, id string, follow bool, tail int64, out OutputFunc) error {
	st, err := c.c.Logs(ctx, &rtpb.LogsRequest{Id: id, Follow: follow, Tail: tail})
	if err != nil {
		return err
	}
	return recvFrames(st, nil, out)
}

func (c *client) List(ctx context.Context, labels map[string]string, all bool) ([]State, error) {
	r, err := c.c.List(ctx, &rtpb.ListRequest{Labels: labels, All: all})
	if err != nil {
		return nil, err
	}
	out := make([]State, 0, len(r.GetContainers()))
	for _, s := range r.GetContainers() {
		out = append(out, stateFromProto(s))
	}
	return out, nil
}

func (c *client) CreateVolume(ctx context.Context, name string, labels map[string]string) (Volume, error) {
	r, err := c.c.CreateVolume(ctx, &rtpb.CreateVolumeRequest{Name: name, Labels: labels})
	if err != nil {
		return Volume{}, err
	}
	return Volume{Name: r.GetName(), Mountpoint: r.GetMountpoint(), Labels: labels}, nil
}

func (c *client) RemoveVolume(ctx context.Context, name string, force bool) error {
	_, err := c.c.RemoveVolume(ctx, &rtpb.RemoveVolumeRequest{Name: name, Force: force})
	return err
}

func (c *client) ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error) {
	r, err := c.c.ListVolumes(ctx, &rtpb.ListRequest{Labels: labels})
	if err != nil {
		return nil, err
	}
	out := make([]Volume, 0, len(r.GetVolumes()))
	for _, v := range r.GetVolumes() {
		out = append(out, Volume{Name: v.GetName(), Labels: v.GetLabels(), Mountpoint: v.GetMountpoint()})
	}
	return out, nil
}

// ---- conversions ----

func specToProto(s Spec) *rtpb.ContainerSpec {
	p := &rtpb.ContainerSpec{
		Name: s.Name, Image: s.Image, Cmd: s.Cmd, Env: s.Env, User: s.User, GroupAdd: s.GroupAdd,
		WorkingDir: s.WorkingDir, Labels: s.Labels, NetworkMode: s.NetworkMode,
		MemoryBytes: s.MemoryBytes, NanoCpus: s.NanoCPUs, PidsLimit: s.PidsLimit,
		ReadOnlyRootfs: s.ReadOnlyRootfs, NoNewPrivileges: s.NoNewPrivileges, CapDrop: s.CapDrop,
		SeccompJson: s.SeccompJSON, OciRuntime: s.OCIRuntime, AutoRemove: s.AutoRemove,
		OpenStdin: s.OpenStdin, LogMaxBytes: s.LogMaxBytes, Init: s.Init,
	}
	for _, m := range s.Mounts {
		p.Mounts = append(p.Mounts, &rtpb.Mount{Type: rtpb.Mount_Type(m.Type), Source: m.Source, Target: m.Target,
			ReadOnly: m.ReadOnly, TmpfsSizeBytes: m.TmpfsSize, TmpfsMode: m.TmpfsMode, TmpfsExec: m.TmpfsExec})
	}
	return p
}

func specFromProto(p *rtpb.ContainerSpec) Spec {
	s := Spec{
		Name: p.GetName(), Image: p.GetImage(), Cmd: p.GetCmd(), Env: p.GetEnv(), User: p.GetUser(),
		GroupAdd: p.GetGroupAdd(), WorkingDir: p.GetWorkingDir(), Labels: p.GetLabels(),
		NetworkMode: p.GetNetworkMode(), MemoryBytes: p.GetMemoryBytes(), NanoCPUs: p.GetNanoCpus(),
		PidsLimit: p.GetPidsLimit(), ReadOnlyRootfs: p.GetReadOnlyRootfs(), NoNewPrivileges: p.GetNoNewPrivileges(),
		CapDrop: p.GetCapDrop(), SeccompJSON: p.GetSeccompJson(), OCIRuntime: p.GetOciRuntime(),
		AutoRemove: p.GetAutoRemove(), OpenStdin: p.GetOpenStdin(), LogMaxBytes: p.GetLogMaxBytes(), Init: p.GetInit(),
	}
	for _, m := range p.GetMounts() {
		s.Mounts = append(s.Mounts, Mount{Type: MountType(m.GetType()), Source: m.GetSource(), Target: m.GetTarget(),
			ReadOnly: m.GetReadOnly(), TmpfsSize: m.GetTmpfsSizeBytes(), TmpfsMode: m.GetTmpfsMode(), TmpfsExec: m.GetTmpfsExec()})
	}
	return s
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

func stateToProto(s State) *rtpb.ContainerState {
	return &rtpb.ContainerState{
		Id: s.ID, Name: s.Name, Image: s.Image, Status: s.Status, Running: s.Running, Paused: s.Paused,
		OomKilled: s.OOMKilled, ExitCode: s.ExitCode, Pid: s.Pid, CreatedUnixMs: ms(s.Created),
		StartedUnixMs: ms(s.Started), FinishedUnixMs: ms(s.Finished), Labels: s.Labels, Error: s.Error,
		Config: configToProto(s.Config),
	}
}

func configToProto(c Config) *rtpb.ContainerConfig {
	p := &rtpb.ContainerConfig{User: c.User, NetworkMode: c.NetworkMode, MemoryBytes: c.MemoryBytes, PidsLimit: c.PidsLimit,
		ReadOnlyRootfs: c.ReadOnlyRootfs, CapDrop: c.CapDrop, CapAdd: c.CapAdd, SecurityOpt: c.SecurityOpt, OciRuntime: c.OCIRuntime}
	for _, m := range c.Mounts {
		p.Mounts = append(p.Mounts, &rtpb.RecordedMount{Type: m.Type, Name: m.Name, Source: m.Source, Target: m.Target})
	}
	return p
}

func configFromProto(p *rtpb.ContainerConfig) Config {
	c := Config{User: p.GetUser(), NetworkMode: p.GetNetworkMode(), MemoryBytes: p.GetMemoryBytes(), PidsLimit: p.GetPidsLimit(),
		ReadOnlyRootfs: p.GetReadOnlyRootfs(), CapDrop: p.GetCapDrop(), CapAdd: p.GetCapAdd(), SecurityOpt: p.GetSecurityOpt(), OCIRuntime: p.GetOciRuntime()}
	for _, m := range p.GetMounts() {
		c.Mounts = append(c.Mounts, RecordedMount{Type: m.GetType(), Name: m.GetName(), Source: m.GetSource(), Target: m.GetTarget()})
	}
	return c
}

func stateFromProto(p *rtpb.ContainerState) State {
	return State{
		ID: p.GetId(), Name: p.GetName(), Image: p.GetImage(), Status: p.GetStatus(), Running: p.GetRunning(),
		Paused: p.GetPaused(), OOMKilled: p.GetOomKilled(), ExitCode: p.GetExitCode(), Pid: p.GetPid(),
		Created: fromMS(p.GetCreatedUnixMs()), Started: fromMS(p.GetStartedUnixMs()),
		Finished: fromMS(p.GetFinishedUnixMs()), Labels: p.GetLabels(), Error: p.GetError(),
		Config: configFromProto(p.GetConfig()),
	}
}
