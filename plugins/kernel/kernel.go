package kernel

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	kernelpb "github.com/fluffy-waffle/fluffy/plugins/kernel/proto"
)

// Service is what the kernel implements for one plugin instance. The
// instance binding is done by the caller: it builds one Service per
// instance, so every call is attributable.
type Service interface {
	RequestCapability(ctx context.Context, syscall, pathGlob string, maxOps int, ttl time.Duration) (base.Capability, error)
	// ReadFile reads path; use.TokenID, when set, presents a capability
	// token for the read.
	ReadFile(ctx context.Context, path string, maxBytes int64, use base.TokenUse) ([]byte, string, error)
	ReportProgress(ctx context.Context, message string, fraction float64) error
}

// Server returns the registration hook for base.Client.Configure.
func Server(impl Service) base.KernelServer {
	return func(s *grpc.Server) { kernelpb.RegisterKernelServer(s, &server{impl: impl}) }
}

type server struct {
	kernelpb.UnimplementedKernelServer
	impl Service
}

func (s *server) RequestCapability(ctx context.Context, r *kernelpb.CapabilityRequest) (*kernelpb.CapabilityResponse, error) {
	c, err := s.impl.RequestCapability(ctx, r.GetSyscall(), r.GetPathGlob(), int(r.GetMaxOps()), time.Duration(r.GetTtlMs())*time.Millisecond)
	if err != nil {
		return &kernelpb.CapabilityResponse{Error: base.ErrorToProto(err)}, nil
	}
	return &kernelpb.CapabilityResponse{TokenId: c.TokenID, ExpiresUnixMs: c.Expires.UnixMilli()}, nil
}

func (s *server) ReadFile(ctx context.Context, r *kernelpb.ReadFileRequest) (*kernelpb.ReadFileResponse, error) {
	b, sum, err := s.impl.ReadFile(ctx, r.GetPath(), r.GetMaxBytes(), base.TokenUse{TokenID: r.GetTokenId(), Nonce: r.GetTokenNonce()})
	if err != nil {
		return &kernelpb.ReadFileResponse{Error: base.ErrorToProto(err)}, nil
	}
	return &kernelpb.ReadFileResponse{Content: b, Sha256: sum}, nil
}

func (s *server) ReportProgress(ctx context.Context, r *kernelpb.ProgressRequest) (*kernelpb.ProgressResponse, error) {
	return &kernelpb.ProgressResponse{}, s.impl.ReportProgress(ctx, r.GetMessage(), r.GetFraction())
}
