package provider

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Limits on one turn as the kernel accepts it from a plugin (model text is
// untrusted and bounded).
const (
	MaxTurnBytes     = 16 << 20
	MaxCallsPerTurn  = 256
	MaxArgumentBytes = 4 << 20
)

// Protocol rules a ProtocolError names.
const (
	RuleOrder     = "order"     // an event out of place
	RuleArguments = "arguments" // a call closed with arguments that are not its JSON
	RuleEnd       = "end"       // the stream ended without done or error
	RuleSize      = "size"      // over the limits above
	RuleEmpty     = "empty"     // an event with no field set
)

// ProtocolError is a plugin breaking the event contract. The kernel client
// reports it as base.MalformedError with this as the cause.
type ProtocolError struct {
	Rule   string
	Detail string
}

func (e *ProtocolError) Error() string { return e.Rule + ": " + e.Detail }

// Turn checks a turn's events against the contract and assembles them.
// The agent loop uses the Result; the kernel client and the conformance
// suite use the checks. Not safe for concurrent use.
type Turn struct {
	text      strings.Builder
	reasoning []ReasoningBlock
	rdelta    strings.Builder
	calls     map[string]*turnCall
	order     []string
	usage     Usage
	done      *Done
	err       *uerr.Error
	bytes     int
}

type turnCall struct {
	name  string
	args  strings.Builder
	end   *ToolCallEnd
	index int
}

// Result is an assembled turn.
type Result struct {
	Text      string
	Reasoning []ReasoningBlock
	// ToolCalls in the order they were started; an Invalid one must not be
	// executed (answer it with InvalidCallResult).
	ToolCalls []ToolCallEnd
	Usage     Usage
	Done      *Done
	Err       *uerr.Error
}

// NewTurn returns an empty turn.
func NewTurn() *Turn { return &Turn{calls: map[string]*turnCall{}} }

func violation(rule, format string, args ...any) error {
	return &ProtocolError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// Add checks and records one event.
func (t *Turn) Add(e Event) error {
	if t.done != nil || t.err != nil {
		return violation(RuleOrder, "%s after the turn ended", eventName(e))
	}
	n := 0
	for _, set := range []bool{e.TextDelta != "", e.ReasoningDelta != "", e.ReasoningEnd != nil, e.ToolCallStart != nil, e.ToolCallDelta != nil, e.ToolCallEnd != nil, e.Usage != nil, e.Done != nil, e.Err != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return violation(RuleEmpty, "an event must set exactly one field, this one sets %d", n)
	}
	t.bytes += len(e.TextDelta) + len(e.ReasoningDelta)
	switch {
	case e.TextDelta != "":
		t.text.WriteString(e.TextDelta)
	case e.ReasoningDelta != "":
		t.rdelta.WriteString(e.ReasoningDelta)
	case e.ReasoningEnd != nil:
		t.bytes += len(e.ReasoningEnd.Text) + len(e.ReasoningEnd.Signature) + len(e.ReasoningEnd.Redacted)
		if e.ReasoningEnd.Text != t.rdelta.String() {
			return violation(RuleOrder, "reasoning_end text (%d bytes) differs from its deltas (%d bytes)", len(e.ReasoningEnd.Text), t.rdelta.Len())
		}
		t.reasoning = append(t.reasoning, *e.ReasoningEnd)
		t.rdelta.Reset()
	case e.ToolCallStart != nil:
		s := e.ToolCallStart
		if s.CallID == "" || s.Name == "" {
			return violation(RuleOrder, "tool_call_start without a call id or name")
		}
		if t.calls[s.CallID] != nil {
			return violation(RuleOrder, "tool call %q started twice", s.CallID)
		}
		if len(t.calls) >= MaxCallsPerTurn {
			return violation(RuleSize, "more than %d tool calls in one turn", MaxCallsPerTurn)
		}
		t.calls[s.CallID] = &turnCall{name: s.Name, index: len(t.order)}
		t.order = append(t.order, s.CallID)
	case e.ToolCallDelta != nil:
		c := t.calls[e.ToolCallDelta.CallID]
		if c == nil || c.end != nil {
			return violation(RuleOrder, "tool_call_delta for call %q, which is not open", e.ToolCallDelta.CallID)
		}
		if c.args.Len()+len(e.ToolCallDelta.ArgumentsDelta) > MaxArgumentBytes {
			return violation(RuleSize, "the arguments of call %q exceed %d bytes", e.ToolCallDelta.CallID, MaxArgumentBytes)
		}
		t.bytes += len(e.ToolCallDelta.ArgumentsDelta)
		c.args.WriteString(e.ToolCallDelta.ArgumentsDelta)
	case e.ToolCallEnd != nil:
		end := *e.ToolCallEnd
		c := t.calls[end.CallID]
		if c == nil || c.end != nil {
			return violation(RuleOrder, "tool_call_end for call %q, which is not open", end.CallID)
		}
		if end.Name != c.name {
			return violation(RuleOrder, "tool_call_end names %q, the call started as %q", end.Name, c.name)
		}
		if err := checkEnd(&end, c.args.String()); err != nil {
			return err
		}
		c.end = &end
	case e.Usage != nil:
		t.usage = *e.Usage
	case e.Done != nil:
		if open := t.open(); len(open) > 0 {
			return violation(RuleOrder, "done while tool calls %s are still open", strings.Join(open, ", "))
		}
		if t.rdelta.Len() > 0 {
			return violation(RuleOrder, "done while a reasoning block is still open")
		}
		d := *e.Done
		t.done = &d
	case e.Err != nil:
		t.err = e.Err
	}
	if t.bytes > MaxTurnBytes {
		return violation(RuleSize, "the turn exceeds %d bytes", MaxTurnBytes)
	}
	return nil
}

// checkEnd makes sure a call's end agrees with its deltas and that a call
// claimed valid really has a JSON object as arguments.
func checkEnd(end *ToolCallEnd, deltas string) error {
	if end.Invalid != nil {
		if string(end.Arguments) != "{}" && len(end.Arguments) != 0 {
			return violation(RuleArguments, "invalid call %q must carry {} as arguments", end.CallID)
		}
		end.Arguments = json.RawMessage("{}")
		return nil
	}
	args := strings.TrimSpace(string(end.Arguments))
	if !isJSONObject([]byte(args)) {
		return violation(RuleArguments, "call %q ended with arguments that are not a JSON object: %.80q", end.CallID, args)
	}
	d := strings.TrimSpace(deltas)
	if d == "" || d == "null" {
		if args != "{}" && d != args {
			return violation(RuleArguments, "call %q ended with arguments %.80q but its deltas carried none", end.CallID, args)
		}
		return nil
	}
	if string(end.Arguments) != deltas {
		return violation(RuleArguments, "call %q ended with arguments that differ from its deltas (%d vs %d bytes)", end.CallID, len(end.Arguments), len(deltas))
	}
	return nil
}

func (t *Turn) open() []string {
	var out []string
	for _, id := range t.order {
		if t.calls[id].end == nil {
			out = append(out, id)
		}
	}
	return out
}

// End checks that the stream ended properly (done or an error arrived).
func (t *Turn) End() error {
	if t.done == nil && t.err == nil {
		return violation(RuleEnd, "the stream ended without a done or error event")
	}
	return nil
}

// Ended reports whether done or an error arrived.
func (t *Turn) Ended() bool { return t.done != nil || t.err != nil }

// Result returns what the turn assembled so far.
func (t *Turn) Result() Result {
	r := Result{Text: t.text.String(), Reasoning: append([]ReasoningBlock(nil), t.reasoning...), Usage: t.usage, Done: t.done, Err: t.err}
	for _, id := range t.order {
		if c := t.calls[id]; c.end != nil {
			r.ToolCalls = append(r.ToolCalls, *c.end)
		}
	}
	return r
}

// AssistantMessage is the turn as the assistant entry of the next
// request: text, reasoning blocks (signatures unchanged) and tool calls
// (invalid ones with {} arguments, answered by InvalidCallResult).
func (r Result) AssistantMessage() Message {
	m := Message{Role: RoleAssistant, Content: r.Text, Reasoning: r.Reasoning}
	for _, c := range r.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.CallID, Name: c.Name, Arguments: c.Arguments})
	}
	return m
}

func eventName(e Event) string {
	switch {
	case e.TextDelta != "":
		return "text_delta"
	case e.ReasoningDelta != "":
		return "reasoning_delta"
	case e.ReasoningEnd != nil:
		return "reasoning_end"
	case e.ToolCallStart != nil:
		return "tool_call_start"
	case e.ToolCallDelta != nil:
		return "tool_call_delta"
	case e.ToolCallEnd != nil:
		return "tool_call_end"
	case e.Usage != nil:
		return "usage"
	case e.Done != nil:
		return "done"
	case e.Err != nil:
		return "error"
	}
	return "an empty event"
}
