package provider

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	pb "github.com/fluffy-waffle/fluffy/plugins/provider/proto/v1"
)

// GRPCPluginV1 is the go-plugin shim for provider API v1: tool calls as
// index-keyed fragments, models as bare names. A plugin written against
// this package serves v1 kernels through it (its events are folded into
// v1's shape; reasoning is not sent), and the kernel reads v1 plugins
// through it (their fragments become start/delta/end events).
type GRPCPluginV1 struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Plugin
}

func (p *GRPCPluginV1) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	base.Register(s, p.Impl, broker)
	pb.RegisterProviderServer(s, &serverV1{impl: p.Impl})
	return nil
}

func (p *GRPCPluginV1) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &clientV1{Client: base.NewClient(conn, broker, 1), c: pb.NewProviderClient(conn)}, nil
}

type serverV1 struct {
	pb.UnimplementedProviderServer
	impl Plugin
}

func (s *serverV1) Models(ctx context.Context, _ *pb.ModelsRequest) (*pb.ModelsResponse, error) {
	ms, err := s.impl.Models(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.ModelsResponse{}
	for _, m := range ms {
		out.Models = append(out.Models, m.ID)
	}
	return out, nil
}

func (s *serverV1) Chat(r *pb.ChatRequest, stream pb.Provider_ChatServer) error {
	req := ChatRequest{Model: r.GetModel(), MaxTokens: int(r.GetMaxTokens())}
	if t := r.GetTemperature(); t != 0 {
		req.Temperature = &t
	}
	for _, m := range r.GetMessages() {
		if m.GetRole() == RoleSystem && len(req.Messages) == 0 {
			// v1 had no system field: leading system messages are the prompt.
			if req.System != "" {
				req.System += "\n\n"
			}
			req.System += m.GetContent()
			continue
		}
		msg := Message{Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId()}
		for _, tc := range m.GetToolCalls() {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArgumentsJson()})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range r.GetTools() {
		req.Tools = append(req.Tools, ToolSpec{Name: t.GetName(), Description: t.GetDescription(), Parameters: t.GetParametersSchema()})
	}
	index := map[string]int32{}
	deliver := func(e Event) error {
		var out *pb.ChatEvent
		switch {
		case e.TextDelta != "":
			out = &pb.ChatEvent{Event: &pb.ChatEvent_TextDelta{TextDelta: e.TextDelta}}
		case e.ToolCallStart != nil:
			i := int32(len(index))
			index[e.ToolCallStart.CallID] = i
			out = &pb.ChatEvent{Event: &pb.ChatEvent_ToolCallDelta{ToolCallDelta: &pb.ToolCallDelta{Index: i, Id: e.ToolCallStart.CallID, Name: e.ToolCallStart.Name}}}
		case e.ToolCallDelta != nil:
			out = &pb.ChatEvent{Event: &pb.ChatEvent_ToolCallDelta{ToolCallDelta: &pb.ToolCallDelta{Index: index[e.ToolCallDelta.CallID], ArgumentsDelta: e.ToolCallDelta.ArgumentsDelta}}}
		case e.Usage != nil:
			out = &pb.ChatEvent{Event: &pb.ChatEvent_Usage{Usage: &pb.Usage{InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens}}}
		case e.Done != nil:
			out = &pb.ChatEvent{Event: &pb.ChatEvent_Done{Done: &pb.Done{StopReason: e.Done.StopReason}}}
		case e.Err != nil:
			out = &pb.ChatEvent{Event: &pb.ChatEvent_Error{Error: base.ErrorToProto(e.Err)}}
		default:
			// Reasoning and tool_call_end have no v1 form.
			return nil
		}
		return stream.Send(out)
	}
	return serveTurn(stream.Context(), s.impl, req, deliver)
}

type clientV1 struct {
	*base.Client
	c pb.ProviderClient
}

func (c *clientV1) Models(ctx context.Context) ([]ModelInfo, error) {
	r, err := c.c.Models(ctx, &pb.ModelsRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]ModelInfo, 0, len(r.GetModels()))
	for _, m := range r.GetModels() {
		out = append(out, ModelInfo{ID: m})
	}
	return out, nil
}

// Chat reads a v1 stream and turns it into v2 events with the same checks
// as a v2 plugin gets: index-keyed fragments become start/delta, calls are
// ended (arguments checked) before done.
func (c *clientV1) Chat(ctx context.Context, req ChatRequest, onEvent func(Event)) error {
	r := &pb.ChatRequest{Model: req.Model, MaxTokens: int32(req.MaxTokens)}
	if req.Temperature != nil {
		r.Temperature = *req.Temperature
	}
	if req.System != "" {
		r.Messages = append(r.Messages, &pb.Message{Role: RoleSystem, Content: req.System})
	}
	for _, m := range req.Messages {
		pm := &pb.Message{Role: m.Role, Content: m.Content, ToolCallId: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, &pb.ToolCall{Id: tc.ID, Name: tc.Name, ArgumentsJson: tc.Arguments})
		}
		r.Messages = append(r.Messages, pm)
	}
	for _, t := range req.Tools {
		r.Tools = append(r.Tools, &pb.ToolSpec{Name: t.Name, Description: t.Description, ParametersSchema: t.Parameters})
	}
	stream, err := c.c.Chat(ctx, r)
	if err != nil {
		return err
	}
	turn := NewTurn()
	var protoErr error
	out := NewStream(func(e Event) error {
		if protoErr != nil {
			return protoErr
		}
		if err := turn.Add(e); err != nil {
			protoErr = err
			return err
		}
		if e.ToolCallEnd != nil {
			e.ToolCallEnd = turn.calls[e.ToolCallEnd.CallID].end
		}
		onEvent(e)
		return nil
	}, req.RequestID, nil)
	ids := map[int32]string{}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if !out.Finished() {
				return malformed(violation(RuleEnd, "the stream ended without a done or error event"))
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch e := ev.GetEvent().(type) {
		case *pb.ChatEvent_TextDelta:
			err = out.Text(e.TextDelta)
		case *pb.ChatEvent_ToolCallDelta:
			d := e.ToolCallDelta
			id, open := ids[d.GetIndex()]
			if !open {
				if d.GetName() == "" {
					return malformed(violation(RuleOrder, "the first fragment of tool call %d has no name", d.GetIndex()))
				}
				id, err = out.StartCall(d.GetId(), d.GetName())
				ids[d.GetIndex()] = id
			}
			if err == nil {
				err = out.CallArgs(id, d.GetArgumentsDelta())
			}
		case *pb.ChatEvent_Usage:
			out.SetUsage(Usage{InputTokens: e.Usage.GetInputTokens(), OutputTokens: e.Usage.GetOutputTokens()})
		case *pb.ChatEvent_Done:
			err = out.Finish(Done{StopReason: normalizeV1Stop(e.Done.GetStopReason()), RawStopReason: e.Done.GetStopReason()})
		case *pb.ChatEvent_Error:
			ue := base.ErrorFromProto(e.Error)
			if ue == nil {
				ue = uerr.New("PLUGIN_ERROR", "the provider reported an error without details", "", "")
			}
			_ = out.Fail(ue)
			return ue
		default:
			return malformed(violation(RuleEmpty, "an event with no field set"))
		}
		if protoErr != nil {
			return malformed(protoErr)
		}
		if err != nil {
			return err
		}
	}
}

// normalizeV1Stop maps the stop words v1 plugins passed through unchanged.
func normalizeV1Stop(s string) string {
	switch strings.ToLower(s) {
	case "stop", "end_turn", "":
		return StopEndTurn
	case "tool_calls", "tool_use", "function_call":
		return StopToolUse
	case "length", "max_tokens":
		return StopMaxTokens
	case "stop_sequence":
		return StopSequence
	case "content_filter":
		return StopContentFilter
	case "refusal":
		return StopRefusal
	}
	return s
}
