package provider

import (
	"context"
	"errors"
	"io"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	pb "github.com/fluffy-waffle/fluffy/plugins/provider/proto"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// PluginName is the key under which a provider plugin is dispensed.
const PluginName = "provider"

// ToolCall is a complete tool call requested by the model.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments []byte `json:"arguments"`
}

// Message is one turn of the conversation.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolSpec describes a tool the model may call.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Parameters  []byte `json:"parameters"`
}

// ChatRequest is one model turn.
type ChatRequest struct {
	Model       string
	Messages    []Message
	Tools       []ToolSpec
	MaxTokens   int
	Temperature float64
}

// Event is one streamed event; exactly one field is set.
type Event struct {
	TextDelta     string
	ToolCallDelta *ToolCallDelta
	Usage         *Usage
	Done          *Done
	Err           *uerr.Error
}

// ToolCallDelta is a fragment of a tool call.
type ToolCallDelta struct {
	Index          int
	ID, Name       string
	ArgumentsDelta string
}

// Usage counts tokens.
type Usage struct{ InputTokens, OutputTokens int64 }

// Done ends a turn.
type Done struct{ StopReason string }

// Plugin is what a provider plugin implements. Chat sends events in order
// and returns when the turn ends or ctx is cancelled.
type Plugin interface {
	base.Plugin
	Models(ctx context.Context) ([]string, error)
	Chat(ctx context.Context, req ChatRequest, send func(Event) error) error
}

// Client is the kernel's view of a provider.
type Client interface {
	APIVersion() int
	Info(ctx context.Context) (base.Info, error)
	Configure(ctx context.Context, cfg base.Config, kernel base.KernelServer) error
	Health(ctx context.Context) error
	Models(ctx context.Context) ([]string, error)
	// Chat streams a turn to onEvent; cancelling ctx stops the stream.
	Chat(ctx context.Context, req ChatRequest, onEvent func(Event)) error
}

// PluginSets maps every requested API version to the one shim (the
// contract did not change between v1 and v2).
func PluginSets(impl Plugin, versions []int) map[int]plugin.PluginSet {
	return base.SharedPluginSets(PluginName, impl, versions,
		func(s *grpc.Server, impl Plugin) { pb.RegisterProviderServer(s, &server{impl: impl}) },
		func(bc *base.Client, conn *grpc.ClientConn) any {
			return &client{Client: bc, c: pb.NewProviderClient(conn)}
		})
}

type server struct {
	pb.UnimplementedProviderServer
	impl Plugin
}

func (s *server) Models(ctx context.Context, _ *pb.ModelsRequest) (*pb.ModelsResponse, error) {
	ms, err := s.impl.Models(ctx)
	if err != nil {
		return nil, err
	}
	return &pb.ModelsResponse{Models: ms}, nil
}

func (s *server) Chat(r *pb.ChatRequest, stream pb.Provider_ChatServer) error {
	req := ChatRequest{Model: r.GetModel(), MaxTokens: int(r.GetMaxTokens()), Temperature: r.GetTemperature()}
	for _, m := range r.GetMessages() {
		msg := Message{Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId()}
		for _, tc := range m.GetToolCalls() {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArgumentsJson()})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range r.GetTools() {
		req.Tools = append(req.Tools, ToolSpec{Name: t.GetName(), Description: t.GetDescription(), Parameters: t.GetParametersSchema()})
	}
	err := s.impl.Chat(stream.Context(), req, func(e Event) error { return stream.Send(eventToProto(e)) })
	if err != nil && stream.Context().Err() == nil {
		// A provider failure is sent as a structured error event, not a
		// broken stream, so the kernel can show what/why/fix.
		return stream.Send(&pb.ChatEvent{Event: &pb.ChatEvent_Error{Error: base.ErrorToProto(err)}})
	}
	return err
}

func eventToProto(e Event) *pb.ChatEvent {
	switch {
	case e.ToolCallDelta != nil:
		d := e.ToolCallDelta
		return &pb.ChatEvent{Event: &pb.ChatEvent_ToolCallDelta{ToolCallDelta: &pb.ToolCallDelta{Index: int32(d.Index), Id: d.ID, Name: d.Name, ArgumentsDelta: d.ArgumentsDelta}}}
	case e.Usage != nil:
		return &pb.ChatEvent{Event: &pb.ChatEvent_Usage{Usage: &pb.Usage{InputTokens: e.Usage.InputTokens, OutputTokens: e.Usage.OutputTokens}}}
	case e.Done != nil:
		return &pb.ChatEvent{Event: &pb.ChatEvent_Done{Done: &pb.Done{StopReason: e.Done.StopReason}}}
	case e.Err != nil:
		return &pb.ChatEvent{Event: &pb.ChatEvent_Error{Error: base.ErrorToProto(e.Err)}}
	}
	return &pb.ChatEvent{Event: &pb.ChatEvent_TextDelta{TextDelta: e.TextDelta}}
}

type client struct {
	*base.Client
	c pb.ProviderClient
}

func (c *client) Models(ctx context.Context) ([]string, error) {
	r, err := c.c.Models(ctx, &pb.ModelsRequest{})
	if err != nil {
		return nil, err
	}
	return r.GetModels(), nil
}

func (c *client) Chat(ctx context.Context, req ChatRequest, onEvent func(Event)) error {
	r := &pb.ChatRequest{Model: req.Model, MaxTokens: int32(req.MaxTokens), Temperature: req.Temperature}
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
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch e := ev.GetEvent().(type) {
		case *pb.ChatEvent_TextDelta:
			onEvent(Event{TextDelta: e.TextDelta})
		case *pb.ChatEvent_ToolCallDelta:
			d := e.ToolCallDelta
			onEvent(Event{ToolCallDelta: &ToolCallDelta{Index: int(d.GetIndex()), ID: d.GetId(), Name: d.GetName(), ArgumentsDelta: d.GetArgumentsDelta()}})
		case *pb.ChatEvent_Usage:
			onEvent(Event{Usage: &Usage{InputTokens: e.Usage.GetInputTokens(), OutputTokens: e.Usage.GetOutputTokens()}})
		case *pb.ChatEvent_Done:
			onEvent(Event{Done: &Done{StopReason: e.Done.GetStopReason()}})
		case *pb.ChatEvent_Error:
			ue := base.ErrorFromProto(e.Error)
			onEvent(Event{Err: ue})
			return ue
		default:
			return base.MalformedError("provider", "empty chat event")
		}
	}
}
