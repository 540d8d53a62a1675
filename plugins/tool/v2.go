package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	toolv2 "github.com/fluffy-waffle/fluffy/plugins/tool/proto/v2"
)

// CancelGrace is how long a v2 client waits, after sending Cancel, for the
// plugin to return its cancelled Result before abandoning the stream.
const CancelGrace = 2 * time.Second

// errCancelFrame is the cancellation cause a plugin sees after a Cancel frame.
var errCancelFrame = errors.New("cancelled by the kernel")

// GRPCPluginV2 is the go-plugin shim for tool API v2.
type GRPCPluginV2 struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Plugin
}

func (p *GRPCPluginV2) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	base.Register(s, p.Impl, broker)
	toolv2.RegisterToolServer(s, &serverV2{impl: p.Impl})
	return nil
}

func (p *GRPCPluginV2) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &clientV2{Client: base.NewClient(conn, broker, 2), c: toolv2.NewToolClient(conn)}, nil
}

type serverV2 struct {
	toolv2.UnimplementedToolServer
	impl Plugin
}

func (s *serverV2) ListTools(ctx context.Context, _ *toolv2.ListToolsRequest) (*toolv2.ListToolsResponse, error) {
	ds, err := s.impl.Tools(ctx)
	if err != nil {
		return nil, err
	}
	return &toolv2.ListToolsResponse{Tools: defsToV2(ds)}, nil
}

func (s *serverV2) Execute(stream toolv2.Tool_ExecuteServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return fmt.Errorf("protocol violation: the first Execute frame must be Start")
	}
	call := Call{ID: start.GetCallId(), Tool: start.GetTool(), Args: start.GetArgsJson()}
	if c := start.GetContext(); c != nil {
		call.SessionID, call.SessionMode, call.OperationID = c.GetSessionId(), c.GetSessionMode(), c.GetOperationId()
		if ms := c.GetDeadlineUnixMs(); ms > 0 {
			call.Deadline = time.UnixMilli(ms)
		}
	}
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(nil)
	if !call.Deadline.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, call.Deadline)
		defer stop()
	}
	// Watch for a Cancel frame while the call runs.
	go func() {
		for {
			f, err := stream.Recv()
			if err != nil {
				return
			}
			if c := f.GetCancel(); c != nil {
				cancel(fmt.Errorf("%w: %s", errCancelFrame, c.GetReason()))
				return
			}
		}
	}()
	var sendMu sync.Mutex
	report := func(p Progress) {
		if p.Time.IsZero() {
			p.Time = time.Now()
		}
		sendMu.Lock()
		defer sendMu.Unlock()
		_ = stream.Send(&toolv2.ExecuteEvent{Event: &toolv2.ExecuteEvent_Progress{Progress: &toolv2.Progress{
			Message: p.Message, Fraction: p.Fraction, UnixMs: p.Time.UnixMilli(),
		}}})
	}
	res, err := s.impl.Execute(ctx, call, report)
	if err != nil {
		return err
	}
	if errors.Is(context.Cause(ctx), errCancelFrame) {
		res.Cancelled = true
	}
	sendMu.Lock()
	defer sendMu.Unlock()
	return stream.Send(&toolv2.ExecuteEvent{Event: &toolv2.ExecuteEvent_Result{Result: resultToV2(res)}})
}

type clientV2 struct {
	*base.Client
	c toolv2.ToolClient
}

func (c *clientV2) Tools(ctx context.Context) ([]Def, error) {
	r, err := c.c.ListTools(ctx, &toolv2.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	return defsFromV2(r.GetTools()), nil
}

func (c *clientV2) Execute(ctx context.Context, call Call, onProgress func(Progress)) (Result, error) {
	// The stream outlives ctx by CancelGrace so the plugin can answer a
	// Cancel frame with its partial, cancelled Result.
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	defer scancel()
	stream, err := c.c.Execute(sctx)
	if err != nil {
		return Result{}, err
	}
	if call.Deadline.IsZero() {
		if dl, ok := ctx.Deadline(); ok {
			call.Deadline = dl
		}
	}
	start := &toolv2.Start{CallId: call.ID, Tool: call.Tool, ArgsJson: call.Args, Context: &toolv2.CallContext{
		SessionId: call.SessionID, SessionMode: call.SessionMode, OperationId: call.OperationID,
	}}
	if !call.Deadline.IsZero() {
		start.Context.DeadlineUnixMs = call.Deadline.UnixMilli()
	}
	if err := stream.Send(&toolv2.ExecuteFrame{Frame: &toolv2.ExecuteFrame_Start{Start: start}}); err != nil {
		return Result{}, err
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-ctx.Done():
			reason := context.Cause(ctx).Error()
			_ = stream.Send(&toolv2.ExecuteFrame{Frame: &toolv2.ExecuteFrame_Cancel{Cancel: &toolv2.Cancel{Reason: reason}}})
			select {
			case <-done:
			case <-time.After(CancelGrace):
				scancel()
			}
		}
	}()
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return Result{}, base.MalformedError(call.Tool, "Execute stream ended without a Result event")
		}
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("tool call %s: %w", call.Tool, context.Cause(ctx))
			}
			return Result{}, err
		}
		switch e := ev.GetEvent().(type) {
		case *toolv2.ExecuteEvent_Progress:
			if onProgress != nil {
				onProgress(Progress{Message: e.Progress.GetMessage(), Fraction: e.Progress.GetFraction(), Time: time.UnixMilli(e.Progress.GetUnixMs())})
			}
		case *toolv2.ExecuteEvent_Result:
			_ = stream.CloseSend()
			return resultFromV2(e.Result), nil
		default:
			return Result{}, base.MalformedError(call.Tool, "Execute stream sent an empty event")
		}
	}
}
