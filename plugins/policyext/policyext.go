package policyext

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	pb "github.com/fluffy-waffle/fluffy/plugins/policyext/proto"
)

// PluginName is the key under which a policy extension is dispensed.
const PluginName = "policy"

// Decisions an extension may return.
const (
	Allow         = "allow"
	Deny          = "deny"
	RequireReview = "require_review"
	Pass          = "pass"
)

// Request is what an extension judges.
type Request struct {
	Syscall      string   `json:"syscall"`
	Path         string   `json:"path,omitempty"`
	Host         string   `json:"host,omitempty"`
	SizeBytes    int64    `json:"size_bytes,omitempty"`
	CallerPlugin string   `json:"caller_plugin,omitempty"`
	CallerTags   []string `json:"caller_tags,omitempty"`
	SessionMode  string   `json:"session_mode,omitempty"`
	State        string   `json:"state,omitempty"`
	ArgsJSON     []byte   `json:"args,omitempty"`
}

// Decision is an extension's answer.
type Decision struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	Rule     string `json:"rule,omitempty"`
}

// Plugin is what a policy extension implements.
type Plugin interface {
	base.Plugin
	Evaluate(ctx context.Context, req Request) (Decision, error)
}

// Client is the kernel's view of a policy extension.
type Client interface {
	APIVersion() int
	Info(ctx context.Context) (base.Info, error)
	Configure(ctx context.Context, cfg base.Config, kernel base.KernelServer) error
	Health(ctx context.Context) error
	Evaluate(ctx context.Context, req Request) (Decision, error)
}

// PluginSets maps every requested API version to the one shim (the
// contract did not change between v1 and v2).
func PluginSets(impl Plugin, versions []int) map[int]plugin.PluginSet {
	return base.SharedPluginSets(PluginName, impl, versions,
		func(s *grpc.Server, impl Plugin) { pb.RegisterPolicyExtensionServer(s, &server{impl: impl}) },
		func(bc *base.Client, conn *grpc.ClientConn) any {
			return &client{Client: bc, c: pb.NewPolicyExtensionClient(conn)}
		})
}

type server struct {
	pb.UnimplementedPolicyExtensionServer
	impl Plugin
}

func (s *server) Evaluate(ctx context.Context, r *pb.EvaluateRequest) (*pb.EvaluateResponse, error) {
	d, err := s.impl.Evaluate(ctx, Request{
		Syscall: r.GetSyscall(), Path: r.GetPath(), Host: r.GetHost(), SizeBytes: r.GetSizeBytes(),
		CallerPlugin: r.GetCallerPlugin(), CallerTags: r.GetCallerTags(), SessionMode: r.GetSessionMode(),
		State: r.GetState(), ArgsJSON: r.GetArgsJson(),
	})
	if err != nil {
		return &pb.EvaluateResponse{Error: base.ErrorToProto(err)}, nil
	}
	return &pb.EvaluateResponse{Decision: d.Decision, Reason: d.Reason, Rule: d.Rule}, nil
}

type client struct {
	*base.Client
	c pb.PolicyExtensionClient
}

// Evaluate returns the extension's decision. A decision outside the four
// known values is a malformed answer (the engine treats it as deny).
func (c *client) Evaluate(ctx context.Context, req Request) (Decision, error) {
	r, err := c.c.Evaluate(ctx, &pb.EvaluateRequest{
		Syscall: req.Syscall, Path: req.Path, Host: req.Host, SizeBytes: req.SizeBytes,
		CallerPlugin: req.CallerPlugin, CallerTags: req.CallerTags, SessionMode: req.SessionMode,
		State: req.State, ArgsJson: req.ArgsJSON,
	})
	if err != nil {
		return Decision{}, err
	}
	if e := base.ErrorFromProto(r.GetError()); e != nil {
		return Decision{}, e
	}
	d := Decision{Decision: r.GetDecision(), Reason: r.GetReason(), Rule: r.GetRule()}
	switch d.Decision {
	case Allow, Deny, RequireReview, Pass:
		return d, nil
	}
	return Decision{}, base.MalformedError("policy extension", "unknown decision "+quote(d.Decision))
}

func quote(s string) string { return "\"" + s + "\"" }
