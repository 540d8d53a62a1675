package tool

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	toolv1 "github.com/fluffy-waffle/fluffy/plugins/tool/proto/v1"
)

// GRPCPluginV1 is the go-plugin shim for tool API v1.
type GRPCPluginV1 struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Plugin
}

func (p *GRPCPluginV1) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	base.Register(s, p.Impl, broker)
	toolv1.RegisterToolServer(s, &serverV1{impl: p.Impl})
	return nil
}

func (p *GRPCPluginV1) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &clientV1{Client: base.NewClient(conn, broker, 1), c: toolv1.NewToolClient(conn)}, nil
}

type serverV1 struct {
	toolv1.UnimplementedToolServer
	impl Plugin
}

func (s *serverV1) ListTools(ctx context.Context, _ *toolv1.ListToolsRequest) (*toolv1.ListToolsResponse, error) {
	ds, err := s.impl.Tools(ctx)
	if err != nil {
		return nil, err
	}
	return &toolv1.ListToolsResponse{Tools: defsToV1(ds)}, nil
}

func (s *serverV1) Execute(ctx context.Context, req *toolv1.ExecuteRequest) (*toolv1.ExecuteResponse, error) {
	call := Call{ID: req.GetCallId(), Tool: req.GetTool(), Args: req.GetArgsJson()}
	if c := req.GetContext(); c != nil {
		call.SessionID, call.SessionMode, call.OperationID = c.GetSessionId(), c.GetSessionMode(), c.GetOperationId()
	}
	if dl, ok := ctx.Deadline(); ok {
		call.Deadline = dl
	}
	res, err := s.impl.Execute(ctx, call, func(Progress) {})
	if err != nil {
		return nil, err
	}
	return &toolv1.ExecuteResponse{Result: resultToV1(res)}, nil
}

type clientV1 struct {
	*base.Client
	c toolv1.ToolClient
}

func (c *clientV1) Tools(ctx context.Context) ([]Def, error) {
	r, err := c.c.ListTools(ctx, &toolv1.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	return defsFromV1(r.GetTools()), nil
}

func (c *clientV1) Execute(ctx context.Context, call Call, _ func(Progress)) (Result, error) {
	r, err := c.c.Execute(ctx, &toolv1.ExecuteRequest{
		CallId: call.ID, Tool: call.Tool, ArgsJson: call.Args,
		Context: &toolv1.CallContext{SessionId: call.SessionID, SessionMode: call.SessionMode, OperationId: call.OperationID},
	})
	if err != nil {
		return Result{}, err
	}
	if r.GetResult() == nil {
		return Result{}, base.MalformedError(call.Tool, "Execute returned no result")
	}
	return resultFromV1(r.GetResult()), nil
}
