package vcs

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	vcspb "github.com/fluffy-waffle/fluffy/plugins/vcs/proto"
)

// PluginName is the key under which a VCS plugin is dispensed.
const PluginName = "vcs"

// FileStatus is one changed path.
type FileStatus struct {
	Path   string `json:"path"`
	Status string `json:"status"`
}

// Status is the working tree state.
type Status struct {
	Branch string       `json:"branch"`
	Head   string       `json:"head"`
	Files  []FileStatus `json:"files"`
}

// LogEntry is one commit.
type LogEntry struct {
	Commit   string `json:"commit"`
	Author   string `json:"author"`
	Message  string `json:"message"`
	UnixTime int64  `json:"unix_time"`
}

// CommitDir is where Commit leaves its work, relative to the plugin's output
// directory: <out>/commits/<commit id>/ holds objects/<2 hex>/<38 hex> (the
// new git objects — blobs, trees, the commit — as zlib-compressed loose
// objects, none the repository already has) and CommitFile. A plugin never
// writes the repository itself: the kernel checks that output and applies it.
const CommitDir = "commits"

// CommitFile is the name of the summary beside the objects.
const CommitFile = "commit.json"

// CommitOutput is the content of CommitFile. Parent is "" for the first
// commit of an unborn branch.
type CommitOutput struct {
	Commit string   `json:"commit"`
	Parent string   `json:"parent"`
	Branch string   `json:"branch"`
	Paths  []string `json:"paths"`
}

// CommitRequest asks for a commit of Paths (vcs-git refuses an empty list:
// the kernel commits exactly what it merged). A
// plugin that builds commits for the kernel to apply (vcs-git) commits
// exactly Paths, each with its content in the working tree (a missing file
// is a deletion), on top of the current branch's HEAD, with Message ending
// in one newline and the author as committer.
type CommitRequest struct {
	Message     string
	Paths       []string
	AuthorName  string
	AuthorEmail string
}

// Plugin is what a VCS plugin implements. Errors that are the user's to fix
// should be *uerr.Error; they travel as structured errors.
type Plugin interface {
	base.Plugin
	Status(ctx context.Context) (Status, error)
	Diff(ctx context.Context, paths []string, staged bool) (string, error)
	Commit(ctx context.Context, req CommitRequest) (string, error)
	Log(ctx context.Context, limit int) ([]LogEntry, error)
}

// Client is the kernel's view of a VCS plugin.
type Client interface {
	APIVersion() int
	Info(ctx context.Context) (base.Info, error)
	Configure(ctx context.Context, cfg base.Config, kernel base.KernelServer) error
	Health(ctx context.Context) error
	Status(ctx context.Context) (Status, error)
	Diff(ctx context.Context, paths []string, staged bool) (string, error)
	Commit(ctx context.Context, req CommitRequest) (string, error)
	Log(ctx context.Context, limit int) ([]LogEntry, error)
}

// PluginSets maps every requested API version to the one shim (the
// contract did not change between v1 and v2).
func PluginSets(impl Plugin, versions []int) map[int]plugin.PluginSet {
	return base.SharedPluginSets(PluginName, impl, versions,
		func(s *grpc.Server, impl Plugin) { vcspb.RegisterVCSServer(s, &server{impl: impl}) },
		func(bc *base.Client, conn *grpc.ClientConn) any {
			return &client{Client: bc, c: vcspb.NewVCSClient(conn)}
		})
}

type server struct {
	vcspb.UnimplementedVCSServer
	impl Plugin
}

func (s *server) Status(ctx context.Context, _ *vcspb.StatusRequest) (*vcspb.StatusResponse, error) {
	st, err := s.impl.Status(ctx)
	if err != nil {
		return &vcspb.StatusResponse{Error: base.ErrorToProto(err)}, nil
	}
	out := &vcspb.StatusResponse{Branch: st.Branch, Head: st.Head}
	for _, f := range st.Files {
		out.Files = append(out.Files, &vcspb.FileStatus{Path: f.Path, Status: f.Status})
	}
	return out, nil
}

func (s *server) Diff(ctx context.Context, r *vcspb.DiffRequest) (*vcspb.DiffResponse, error) {
	d, err := s.impl.Diff(ctx, r.GetPaths(), r.GetStaged())
	if err != nil {
		return &vcspb.DiffResponse{Error: base.ErrorToProto(err)}, nil
	}
	return &vcspb.DiffResponse{UnifiedDiff: d}, nil
}

func (s *server) Commit(ctx context.Context, r *vcspb.CommitRequest) (*vcspb.CommitResponse, error) {
	c, err := s.impl.Commit(ctx, CommitRequest{Message: r.GetMessage(), Paths: r.GetPaths(), AuthorName: r.GetAuthorName(), AuthorEmail: r.GetAuthorEmail()})
	if err != nil {
		return &vcspb.CommitResponse{Error: base.ErrorToProto(err)}, nil
	}
	return &vcspb.CommitResponse{Commit: c}, nil
}

func (s *server) Log(ctx context.Context, r *vcspb.LogRequest) (*vcspb.LogResponse, error) {
	es, err := s.impl.Log(ctx, int(r.GetLimit()))
	if err != nil {
		return &vcspb.LogResponse{Error: base.ErrorToProto(err)}, nil
	}
	out := &vcspb.LogResponse{}
	for _, e := range es {
		out.Entries = append(out.Entries, &vcspb.LogEntry{Commit: e.Commit, Author: e.Author, Message: e.Message, UnixTime: e.UnixTime})
	}
	return out, nil
}

type client struct {
	*base.Client
	c vcspb.VCSClient
}

func (c *client) Status(ctx context.Context) (Status, error) {
	r, err := c.c.Status(ctx, &vcspb.StatusRequest{})
	if err != nil {
		return Status{}, err
	}
	if e := base.ErrorFromProto(r.GetError()); e != nil {
		return Status{}, e
	}
	st := Status{Branch: r.GetBranch(), Head: r.GetHead()}
	for _, f := range r.GetFiles() {
		st.Files = append(st.Files, FileStatus{Path: f.GetPath(), Status: f.GetStatus()})
	}
	return st, nil
}

func (c *client) Diff(ctx context.Context, paths []string, staged bool) (string, error) {
	r, err := c.c.Diff(ctx, &vcspb.DiffRequest{Paths: paths, Staged: staged})
	if err != nil {
		return "", err
	}
	if e := base.ErrorFromProto(r.GetError()); e != nil {
		return "", e
	}
	return r.GetUnifiedDiff(), nil
}

func (c *client) Commit(ctx context.Context, req CommitRequest) (string, error) {
	r, err := c.c.Commit(ctx, &vcspb.CommitRequest{Message: req.Message, Paths: req.Paths, AuthorName: req.AuthorName, AuthorEmail: req.AuthorEmail})
	if err != nil {
		return "", err
	}
	if e := base.ErrorFromProto(r.GetError()); e != nil {
		return "", e
	}
	return r.GetCommit(), nil
}

func (c *client) Log(ctx context.Context, limit int) ([]LogEntry, error) {
	r, err := c.c.Log(ctx, &vcspb.LogRequest{Limit: int32(limit)})
	if err != nil {
		return nil, err
	}
	if e := base.ErrorFromProto(r.GetError()); e != nil {
		return nil, e
	}
	var out []LogEntry
	for _, e := range r.GetEntries() {
		out = append(out, LogEntry{Commit: e.GetCommit(), Author: e.GetAuthor(), Message: e.GetMessage(), UnixTime: e.GetUnixTime()})
	}
	return out, nil
}
