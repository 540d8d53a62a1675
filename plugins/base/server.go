package base

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	basepb "github.com/fluffy-waffle/fluffy/plugins/base/proto"
	kernelpb "github.com/fluffy-waffle/fluffy/plugins/kernel/proto"
)

// Server serves the Base service for one plugin implementation. Kind
// packages register it beside their own service.
type Server struct {
	basepb.UnimplementedBaseServer
	Impl   Plugin
	Broker *plugin.GRPCBroker
}

// Register adds the Base service to s.
func Register(s *grpc.Server, impl Plugin, broker *plugin.GRPCBroker) {
	basepb.RegisterBaseServer(s, &Server{Impl: impl, Broker: broker})
}

func (s *Server) Info(context.Context, *basepb.InfoRequest) (*basepb.InfoResponse, error) {
	i := s.Impl.Info()
	vs := make([]int32, len(i.APIVersions))
	for k, v := range i.APIVersions {
		vs[k] = int32(v)
	}
	return &basepb.InfoResponse{Name: i.Name, Kind: string(i.Kind), Version: i.Version, ApiVersions: vs}, nil
}

func (s *Server) Configure(ctx context.Context, req *basepb.ConfigureRequest) (*basepb.ConfigureResponse, error) {
	cfg := Config{
		ConfigJSON:     req.GetConfigJson(),
		SessionID:      req.GetSessionId(),
		InstanceID:     req.GetInstanceId(),
		Workspace:      req.GetWorkspace(),
		OutDir:         req.GetOutDir(),
		SessionMode:    req.GetSessionMode(),
		APIVersion:     int(req.GetApiVersion()),
		KernelBrokerID: req.GetKernelBrokerId(),
	}
	var kc KernelClient
	if cfg.KernelBrokerID != 0 && s.Broker != nil {
		conn, err := s.Broker.Dial(cfg.KernelBrokerID)
		if err != nil {
			return nil, err
		}
		kc = &kernelClient{c: kernelpb.NewKernelClient(conn)}
	}
	if err := s.Impl.Configure(ctx, cfg, kc); err != nil {
		return nil, err
	}
	return &basepb.ConfigureResponse{}, nil
}

func (s *Server) Health(ctx context.Context, _ *basepb.HealthRequest) (*basepb.HealthResponse, error) {
	if err := s.Impl.Health(ctx); err != nil {
		return &basepb.HealthResponse{Ok: false, Message: err.Error()}, nil
	}
	return &basepb.HealthResponse{Ok: true}, nil
}
