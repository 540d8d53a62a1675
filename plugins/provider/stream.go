package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// MaxRawArguments bounds how much of an invalid call's arguments is kept
// in ToolCallEnd.RawArguments.
const MaxRawArguments = 4 << 10

// Stream is the plugin-side builder of a well-formed event sequence. A
// provider plugin feeds it what it decoded from its upstream, after
// resolving the upstream's own quirks to call ids; Stream enforces the
// contract: calls are started once, their arguments assembled and checked
// at the end, names mapped back from the wire, usage sent once before
// Done, and nothing after Done or an error.
//
// It is not safe for concurrent use.
type Stream struct {
	send      func(Event) error
	names     *ToolNames
	requestID string

	calls     map[string]*streamCall
	order     []string
	generated int

	reasoning   strings.Builder
	inReasoning bool

	usage    *Usage
	finished bool

	delivered         bool
	deliveredToolCall bool
}

type streamCall struct {
	id, name string
	args     strings.Builder
	ended    bool
}

// NewStream returns a Stream sending to send. requestID seeds the ids
// generated for calls the upstream left without one; names maps wire
// names back (nil: names pass unchanged).
func NewStream(send func(Event) error, requestID string, names *ToolNames) *Stream {
	return &Stream{send: send, names: names, requestID: requestID, calls: map[string]*streamCall{}}
}

// Delivered reports whether any answer event (text, reasoning or a tool
// call) was sent: after that, retrying the request would repeat output.
func (s *Stream) Delivered() bool { return s.delivered }

// DeliveredToolCall reports whether a tool call was announced.
func (s *Stream) DeliveredToolCall() bool { return s.deliveredToolCall }

// Finished reports whether Done or an error was sent.
func (s *Stream) Finished() bool { return s.finished }

func (s *Stream) emit(e Event) error {
	if s.finished {
		return nil
	}
	return s.send(e)
}

// Text sends a text delta (empty deltas are dropped). Open reasoning is
// closed first: reasoning precedes the answer.
func (s *Stream) Text(delta string) error {
	if delta == "" || s.finished {
		return nil
	}
	if err := s.closeReasoning("", nil); err != nil {
		return err
	}
	s.delivered = true
	return s.emit(Event{TextDelta: delta})
}

// Reasoning sends a reasoning delta, opening a block if none is open.
func (s *Stream) Reasoning(delta string) error {
	if delta == "" || s.finished {
		return nil
	}
	s.inReasoning = true
	s.reasoning.WriteString(delta)
	s.delivered = true
	return s.emit(Event{ReasoningDelta: delta})
}

// EndReasoning closes the open reasoning block with its signature (may be
// empty). With redacted set, it sends a redacted block (no text) even if
// none was open.
func (s *Stream) EndReasoning(signature string, redacted []byte) error {
	if s.finished {
		return nil
	}
	if !s.inReasoning && signature == "" && len(redacted) == 0 {
		return nil
	}
	s.inReasoning = true
	return s.closeReasoning(signature, redacted)
}

func (s *Stream) closeReasoning(signature string, redacted []byte) error {
	if !s.inReasoning {
		return nil
	}
	b := &ReasoningBlock{Text: s.reasoning.String(), Signature: signature, Redacted: redacted}
	s.reasoning.Reset()
	s.inReasoning = false
	s.delivered = true
	return s.emit(Event{ReasoningEnd: b})
}

// StartCall announces a tool call and returns the id it travels under:
// id itself, or a stable generated one when id is empty or already used
// in this turn. wireName is mapped back to the fluffy name.
func (s *Stream) StartCall(id, wireName string) (string, error) {
	if s.finished {
		return id, nil
	}
	if err := s.closeReasoning("", nil); err != nil {
		return id, err
	}
	if id == "" || s.calls[id] != nil {
		id = s.newID()
	}
	name, _ := s.names.Fluffy(wireName)
	c := &streamCall{id: id, name: name}
	s.calls[id] = c
	s.order = append(s.order, id)
	s.delivered, s.deliveredToolCall = true, true
	return id, s.emit(Event{ToolCallStart: &ToolCallStart{CallID: id, Name: name}})
}

func (s *Stream) newID() string {
	for {
		s.generated++
		sum := sha256.Sum256([]byte(s.requestID))
		id := fmt.Sprintf("call_%s_%d", hex.EncodeToString(sum[:4]), s.generated)
		if s.calls[id] == nil {
			return id
		}
	}
}

// CallArgs sends a fragment of call id's arguments.
func (s *Stream) CallArgs(id, fragment string) error {
	c := s.calls[id]
	if s.finished || fragment == "" || c == nil || c.ended {
		return nil
	}
	c.args.WriteString(fragment)
	return s.emit(Event{ToolCallDelta: &ToolCallDelta{CallID: id, ArgumentsDelta: fragment}})
}

// EndCall closes call id, checking its arguments.
func (s *Stream) EndCall(id string) error { return s.endCall(id, false) }

func (s *Stream) endCall(id string, truncated bool) error {
	c := s.calls[id]
	if s.finished || c == nil || c.ended {
		return nil
	}
	c.ended = true
	return s.emit(Event{ToolCallEnd: CheckArguments(c.id, c.name, c.args.String(), truncated)})
}

// OpenCalls lists the ids of calls started but not ended, in order.
func (s *Stream) OpenCalls() []string {
	var out []string
	for _, id := range s.order {
		if !s.calls[id].ended {
			out = append(out, id)
		}
	}
	return out
}

// SetUsage records the turn's usage; the last call wins and it is sent
// once, just before Done.
func (s *Stream) SetUsage(u Usage) { s.usage = &u }

// Finish ends the turn: open reasoning and calls are closed (the last
// call started, if still open when the model hit max_tokens, is invalid:
// cut off), usage is sent, then Done.
func (s *Stream) Finish(d Done) error {
	if s.finished {
		return nil
	}
	if err := s.closeReasoning("", nil); err != nil {
		return err
	}
	// Only the call the model was writing when it hit the limit is cut
	// off; calls it had moved on from are complete.
	last := ""
	if len(s.order) > 0 {
		last = s.order[len(s.order)-1]
	}
	for _, id := range s.OpenCalls() {
		if err := s.endCall(id, d.StopReason == StopMaxTokens && id == last); err != nil {
			return err
		}
	}
	if s.usage != nil {
		if err := s.emit(Event{Usage: s.usage}); err != nil {
			return err
		}
	}
	err := s.emit(Event{Done: &d})
	s.finished = true
	return err
}

// Fail ends the turn with an error event (a *uerr.Error; other errors are
// wrapped as upstream errors). Calls still open are not closed: the turn
// failed and none of them may run.
func (s *Stream) Fail(err error) error {
	if s.finished || err == nil {
		return nil
	}
	ue, ok := uerr.As(err)
	if !ok {
		ue = NewError(CodeUpstream, "the model's answer failed", err.Error(), "retry; if it persists, check the provider's status page", RetryInfo{})
	}
	if s.usage != nil {
		_ = s.emit(Event{Usage: s.usage})
	}
	e := s.emit(Event{Err: ue})
	s.finished = true
	return e
}

// CheckArguments builds the end of a call from its assembled arguments:
// empty or null means {}; anything that is not one JSON object, or was cut
// off (truncated), makes the call invalid.
func CheckArguments(id, name, raw string, truncated bool) *ToolCallEnd {
	end := &ToolCallEnd{CallID: id, Name: name}
	trimmed := strings.TrimSpace(raw)
	if !truncated && (trimmed == "" || trimmed == "null") {
		end.Arguments = json.RawMessage("{}")
		return end
	}
	if !truncated && isJSONObject([]byte(trimmed)) {
		end.Arguments = json.RawMessage(raw)
		return end
	}
	end.Arguments = json.RawMessage("{}")
	end.RawArguments = raw
	if len(end.RawArguments) > MaxRawArguments {
		end.RawArguments = end.RawArguments[:MaxRawArguments] + "…"
	}
	if truncated {
		end.Invalid = uerr.New(CodeInvalidToolCall, fmt.Sprintf("the call to %s was cut off by the output token limit", name),
			fmt.Sprintf("its arguments are incomplete (%d bytes arrived)", len(raw)),
			"call the tool again with the complete arguments; split large content into smaller calls")
		return end
	}
	end.Invalid = uerr.New(CodeInvalidToolCall, fmt.Sprintf("the arguments of call %s to %s are not a JSON object", clipQuote(id, 100), name),
		describeJSONProblem([]byte(trimmed))+": "+clipQuote(trimmed, maxShownArguments),
		"call the tool again with its arguments as one JSON object matching its parameters")
	return end
}

// maxShownArguments bounds the invalid arguments quoted in an error.
const maxShownArguments = 300

// clipQuote is s cut to n bytes (on a rune boundary) and quoted, control
// and invisible characters escaped: model output is untrusted.
func clipQuote(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}

func isJSONObject(b []byte) bool {
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

func describeJSONProblem(b []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&v); err != nil {
		return "they do not parse as JSON: " + err.Error()
	}
	if dec.More() {
		return "they hold more than one JSON value"
	}
	kind := "null"
	switch v.(type) {
	case []any:
		kind = "array"
	case string:
		kind = "string"
	case float64:
		kind = "number"
	case bool:
		kind = "boolean"
	}
	return "they are a JSON " + kind + ", not an object"
}
