package provider

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	basepb "github.com/fluffy-waffle/fluffy/plugins/base/proto"
	pb "github.com/fluffy-waffle/fluffy/plugins/provider/proto/v2"
)

// GRPCPluginV2 is the go-plugin shim for provider API v2.
type GRPCPluginV2 struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Plugin
}

func (p *GRPCPluginV2) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	base.Register(s, p.Impl, broker)
	pb.RegisterProviderServer(s, &serverV2{impl: p.Impl})
	return nil
}

func (p *GRPCPluginV2) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &clientV2{Client: base.NewClient(conn, broker, 2), c: pb.NewProviderClient(conn)}, nil
}

type serverV2 struct {
	pb.UnimplementedProviderServer
	impl Plugin
}

func (s *serverV2) Models(ctx context.Context, _ *pb.ModelsRequest) (*pb.ModelsResponse, error) {
	ms, err := s.impl.Models(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.ModelsResponse{}
	for _, m := range ms {
		out.Models = append(out.Models, &pb.ModelInfo{Id: m.ID, ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxOutputTokens,
			Tools: m.Tools, ParallelToolCalls: m.ParallelToolCalls, Reasoning: m.Reasoning, PromptCaching: m.PromptCaching, Vision: m.Vision})
	}
	return out, nil
}

func (s *serverV2) Chat(r *pb.ChatRequest, stream pb.Provider_ChatServer) error {
	return serveTurn(stream.Context(), s.impl, requestFromV2(r), func(e Event) error { return stream.Send(eventToV2(e)) })
}

type clientV2 struct {
	*base.Client
	c pb.ProviderClient
}

func (c *clientV2) Models(ctx context.Context) ([]ModelInfo, error) {
	r, err := c.c.Models(ctx, &pb.ModelsRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]ModelInfo, 0, len(r.GetModels()))
	for _, m := range r.GetModels() {
		out = append(out, ModelInfo{ID: m.GetId(), ContextWindow: m.GetContextWindow(), MaxOutputTokens: m.GetMaxOutputTokens(),
			Tools: m.GetTools(), ParallelToolCalls: m.GetParallelToolCalls(), Reasoning: m.GetReasoning(), PromptCaching: m.GetPromptCaching(), Vision: m.GetVision()})
	}
	return out, nil
}

func (c *clientV2) Chat(ctx context.Context, req ChatRequest, onEvent func(Event)) error {
	stream, err := c.c.Chat(ctx, requestToV2(req))
	if err != nil {
		return err
	}
	turn := NewTurn()
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if err := turn.End(); err != nil {
				return malformed(err)
			}
			return nil
		}
		if err != nil {
			return err
		}
		e, ok := eventFromV2(ev)
		if !ok {
			return malformed(violation(RuleEmpty, "an event with no field set"))
		}
		if err := turn.Add(e); err != nil {
			return malformed(err)
		}
		if e.ToolCallEnd != nil {
			// Turn normalised it (null arguments → {}).
			r := turn.calls[e.ToolCallEnd.CallID].end
			e.ToolCallEnd = r
		}
		onEvent(e)
		if e.Err != nil {
			return e.Err
		}
	}
}

// malformed reports a plugin that broke the event contract.
func malformed(cause error) *uerr.Error {
	e := base.MalformedError("provider", "the provider's event stream broke the contract: "+cause.Error())
	e.Err = cause
	return e
}

// ---- conversions ----

func requestToV2(req ChatRequest) *pb.ChatRequest {
	r := &pb.ChatRequest{RequestId: req.RequestID, Model: req.Model, System: req.System, MaxTokens: int32(req.MaxTokens),
		CacheSystem: req.CacheSystem, CacheTools: req.CacheTools, DisableParallelToolCalls: req.DisableParallelToolCalls}
	if req.Temperature != nil {
		r.HasTemperature, r.Temperature = true, *req.Temperature
	}
	if req.ToolChoice != (ToolChoice{}) {
		r.ToolChoice = &pb.ToolChoice{Mode: req.ToolChoice.Mode, Name: req.ToolChoice.Name}
	}
	if req.Reasoning != nil {
		r.Reasoning = &pb.Reasoning{Effort: req.Reasoning.Effort, BudgetTokens: req.Reasoning.BudgetTokens}
	}
	for _, m := range req.Messages {
		pm := &pb.Message{Role: m.Role, Content: m.Content, ToolCallId: m.ToolCallID, IsError: m.IsError, CacheBreakpoint: m.CacheBreakpoint}
		for _, tc := range m.ToolCalls {
			pm.ToolCalls = append(pm.ToolCalls, &pb.ToolCall{Id: tc.ID, Name: tc.Name, ArgumentsJson: tc.Arguments})
		}
		for _, b := range m.Reasoning {
			pm.Reasoning = append(pm.Reasoning, &pb.ReasoningBlock{Text: b.Text, Signature: b.Signature, Redacted: b.Redacted})
		}
		r.Messages = append(r.Messages, pm)
	}
	for _, t := range req.Tools {
		r.Tools = append(r.Tools, &pb.ToolSpec{Name: t.Name, Description: t.Description, ParametersSchema: t.Parameters})
	}
	return r
}

func requestFromV2(r *pb.ChatRequest) ChatRequest {
	req := ChatRequest{RequestID: r.GetRequestId(), Model: r.GetModel(), System: r.GetSystem(), MaxTokens: int(r.GetMaxTokens()),
		CacheSystem: r.GetCacheSystem(), CacheTools: r.GetCacheTools(), DisableParallelToolCalls: r.GetDisableParallelToolCalls()}
	if r.GetHasTemperature() {
		t := r.GetTemperature()
		req.Temperature = &t
	}
	if tc := r.GetToolChoice(); tc != nil {
		req.ToolChoice = ToolChoice{Mode: tc.GetMode(), Name: tc.GetName()}
	}
	if rs := r.GetReasoning(); rs != nil {
		req.Reasoning = &Reasoning{Effort: rs.GetEffort(), BudgetTokens: rs.GetBudgetTokens()}
	}
	for _, m := range r.GetMessages() {
		msg := Message{Role: m.GetRole(), Content: m.GetContent(), ToolCallID: m.GetToolCallId(), IsError: m.GetIsError(), CacheBreakpoint: m.GetCacheBreakpoint()}
		for _, tc := range m.GetToolCalls() {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.GetId(), Name: tc.GetName(), Arguments: tc.GetArgumentsJson()})
		}
		for _, b := range m.GetReasoning() {
			msg.Reasoning = append(msg.Reasoning, ReasoningBlock{Text: b.GetText(), Signature: b.GetSignature(), Redacted: b.GetRedacted()})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range r.GetTools() {
		req.Tools = append(req.Tools, ToolSpec{Name: t.GetName(), Description: t.GetDescription(), Parameters: t.GetParametersSchema()})
	}
	return req
}

func eventToV2(e Event) *pb.ChatEvent {
	switch {
	case e.ReasoningDelta != "":
		return &pb.ChatEvent{Event: &pb.ChatEvent_ReasoningDelta{ReasoningDelta: e.ReasoningDelta}}
	case e.ReasoningEnd != nil:
		b := e.ReasoningEnd
		return &pb.ChatEvent{Event: &pb.ChatEvent_ReasoningEnd{ReasoningEnd: &pb.ReasoningBlock{Text: b.Text, Signature: b.Signature, Redacted: b.Redacted}}}
	case e.ToolCallStart != nil:
		return &pb.ChatEvent{Event: &pb.ChatEvent_ToolCallStart{ToolCallStart: &pb.ToolCallStart{CallId: e.ToolCallStart.CallID, Name: e.ToolCallStart.Name}}}
	case e.ToolCallDelta != nil:
		return &pb.ChatEvent{Event: &pb.ChatEvent_ToolCallDelta{ToolCallDelta: &pb.ToolCallDelta{CallId: e.ToolCallDelta.CallID, ArgumentsDelta: e.ToolCallDelta.ArgumentsDelta}}}
	case e.ToolCallEnd != nil:
		x := e.ToolCallEnd
		return &pb.ChatEvent{Event: &pb.ChatEvent_ToolCallEnd{ToolCallEnd: &pb.ToolCallEnd{CallId: x.CallID, Name: x.Name, ArgumentsJson: x.Arguments,
			Invalid: errorToProtoOrNil(x.Invalid), RawArguments: []byte(x.RawArguments)}}}
	case e.Usage != nil:
		u := e.Usage
		return &pb.ChatEvent{Event: &pb.ChatEvent_Usage{Usage: &pb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens}}}
	case e.Done != nil:
		d := e.Done
		return &pb.ChatEvent{Event: &pb.ChatEvent_Done{Done: &pb.Done{StopReason: d.StopReason, RawStopReason: d.RawStopReason, UpstreamRequestId: d.UpstreamRequestID, Model: d.Model}}}
	case e.Err != nil:
		ri := RetryOf(e.Err)
		return &pb.ChatEvent{Event: &pb.ChatEvent_Error{Error: &pb.StreamError{Error: base.ErrorToProto(e.Err), Retryable: ri.Retryable,
			RetryAfterMs: ri.After.Milliseconds(), HttpStatus: int32(ri.HTTPStatus), UpstreamRequestId: ri.UpstreamRequestID,
			Attempts: int32(ri.Attempts), RetriesSpent: ri.RetriesSpent}}}
	}
	return &pb.ChatEvent{Event: &pb.ChatEvent_TextDelta{TextDelta: e.TextDelta}}
}

func errorToProtoOrNil(e *uerr.Error) *basepb.Error {
	if e == nil {
		return nil
	}
	return base.ErrorToProto(e)
}

func eventFromV2(ev *pb.ChatEvent) (Event, bool) {
	switch x := ev.GetEvent().(type) {
	case *pb.ChatEvent_TextDelta:
		return Event{TextDelta: x.TextDelta}, x.TextDelta != ""
	case *pb.ChatEvent_ReasoningDelta:
		return Event{ReasoningDelta: x.ReasoningDelta}, x.ReasoningDelta != ""
	case *pb.ChatEvent_ReasoningEnd:
		b := x.ReasoningEnd
		return Event{ReasoningEnd: &ReasoningBlock{Text: b.GetText(), Signature: b.GetSignature(), Redacted: b.GetRedacted()}}, b != nil
	case *pb.ChatEvent_ToolCallStart:
		return Event{ToolCallStart: &ToolCallStart{CallID: x.ToolCallStart.GetCallId(), Name: x.ToolCallStart.GetName()}}, x.ToolCallStart != nil
	case *pb.ChatEvent_ToolCallDelta:
		return Event{ToolCallDelta: &ToolCallDelta{CallID: x.ToolCallDelta.GetCallId(), ArgumentsDelta: x.ToolCallDelta.GetArgumentsDelta()}}, x.ToolCallDelta != nil
	case *pb.ChatEvent_ToolCallEnd:
		y := x.ToolCallEnd
		end := &ToolCallEnd{CallID: y.GetCallId(), Name: y.GetName(), Arguments: y.GetArgumentsJson(), RawArguments: string(y.GetRawArguments())}
		if y.GetInvalid() != nil {
			end.Invalid = base.ErrorFromProto(y.GetInvalid())
		}
		return Event{ToolCallEnd: end}, y != nil
	case *pb.ChatEvent_Usage:
		u := x.Usage
		return Event{Usage: &Usage{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), CacheReadTokens: u.GetCacheReadTokens(),
			CacheWriteTokens: u.GetCacheWriteTokens(), ReasoningTokens: u.GetReasoningTokens()}}, u != nil
	case *pb.ChatEvent_Done:
		d := x.Done
		return Event{Done: &Done{StopReason: d.GetStopReason(), RawStopReason: d.GetRawStopReason(), UpstreamRequestID: d.GetUpstreamRequestId(), Model: d.GetModel()}}, d != nil
	case *pb.ChatEvent_Error:
		se := x.Error
		ue := base.ErrorFromProto(se.GetError())
		if ue == nil {
			ue = uerr.New("PLUGIN_ERROR", "the provider reported an error without details", "", "")
		}
		ue.Err = &RetryInfo{Retryable: se.GetRetryable(), After: time.Duration(se.GetRetryAfterMs()) * time.Millisecond,
			HTTPStatus: int(se.GetHttpStatus()), UpstreamRequestID: se.GetUpstreamRequestId(),
			Attempts: int(se.GetAttempts()), RetriesSpent: se.GetRetriesSpent()}
		return Event{Err: ue}, true
	}
	return Event{}, false
}
