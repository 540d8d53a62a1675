package cassette

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"unicode"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// Limits on a cassette. MaxBytes stays under gRPC's default 4 MiB message
// size, since the kernel hands the cassette to the plugin in Configure.
const (
	MaxBytes     = 3 << 20
	MaxLineBytes = MaxBytes
	MaxTurns     = 10000
	// MaxDelayMS bounds a turn's pause between events.
	MaxDelayMS = 10000
)

// Error codes.
const (
	// CodeInvalid: the cassette cannot be parsed or breaks the event contract.
	CodeInvalid = "PROVIDER_CASSETTE_INVALID"
	// CodeMismatch: a request differs from the one the cassette recorded.
	CodeMismatch = "PROVIDER_REPLAY_MISMATCH"
	// CodeExhausted: the conversation went past the cassette's last turn.
	CodeExhausted = "PROVIDER_REPLAY_EXHAUSTED"
)

// Turn is one line of a cassette: the answer to turn Turn (1-based) of a
// conversation.
type Turn struct {
	Turn int `json:"turn"`
	// RequestSHA256, when set, is RequestHash of the request this turn
	// answers; a request with another hash is a mismatch.
	RequestSHA256 string `json:"request_sha256,omitempty"`
	// Request, informative only: the last message of the recorded request,
	// shortened (shown in mismatch errors).
	Request string `json:"request,omitempty"`
	// DelayMS pauses this long between events (0: none).
	DelayMS int              `json:"delay_ms,omitempty"`
	Events  []provider.Event `json:"events"`
}

// Cassette is a parsed, validated cassette.
//
// A turn number usually has one line. It may have several (consecutive
// lines with the same turn), when one conversation point was asked more
// than once: answers to different requests are told apart by
// request_sha256, and identical requests get that turn's lines for their
// hash in order, one per request, the last repeating. Only such turns keep
// state in the Cassette (how many of each were served); a turn with one
// line is answered the same every time.
type Cassette struct {
	Turns []Turn

	mu     sync.Mutex
	served map[string]int // "turn\x00hash" ("*\x00hash" found by hash alone) → requests answered so far
}

// TurnOf is the turn number of a request in its conversation: one more
// than the number of assistant messages it carries. It needs no state, so
// a restarted plugin, or two sessions at once, still find their turn.
func TurnOf(req provider.ChatRequest) int {
	n := 1
	for _, m := range req.Messages {
		if m.Role == provider.RoleAssistant {
			n++
		}
	}
	return n
}

// RequestHash hashes what identifies a request's turn: the role and tool
// call id of its last message and, unless it is a tool result, its content
// (the user's prompt, a nudge). A tool result's content is left out: a
// recorded session's test output carries timings and differs on every
// run, while the call it answers does not. "" for a request without
// messages.
func RequestHash(req provider.ChatRequest) string {
	if len(req.Messages) == 0 {
		return ""
	}
	m := req.Messages[len(req.Messages)-1]
	content := m.Content
	if m.Role == provider.RoleTool {
		content = fmt.Sprintf("is_error=%t", m.IsError)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", m.Role, m.ToolCallID, content)
	return hex.EncodeToString(h.Sum(nil))
}

// describe is a short, printable description of a request's last message:
// what RequestHash covers, so a recording describes a turn the same way on
// every run.
func describe(req provider.ChatRequest) string {
	if len(req.Messages) == 0 {
		return "no messages"
	}
	m := req.Messages[len(req.Messages)-1]
	if m.Role == provider.RoleTool {
		s := "tool result for call " + Shorten(m.ToolCallID, 40)
		if m.IsError {
			s += " (an error)"
		}
		return s
	}
	return m.Role + " message " + Shorten(m.Content, 80)
}

// Shorten quotes s with control characters escaped, cut to n runes.
func Shorten(s string, n int) string {
	r := []rune(s)
	cut := len(r) > n
	if cut {
		r = r[:n]
	}
	q := fmt.Sprintf("%q", string(r))
	if cut {
		q += "…"
	}
	return q
}

func invalid(format string, args ...any) *uerr.Error {
	return uerr.New(CodeInvalid, "the replay cassette is unusable", fmt.Sprintf(format, args...),
		"fix the cassette (docs/providers.md describes the format) or record it again")
}

// Parse reads and validates a cassette: JSON lines (blank lines and lines
// starting with # are ignored), turns numbered 1, 2, 3… in order, each
// turn's events a well-formed provider turn ending in done or an error.
func Parse(r io.Reader) (*Cassette, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, invalid("reading it failed: %v", err)
	}
	if len(data) > MaxBytes {
		return nil, invalid("it is larger than %d bytes", MaxBytes)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes+1)
	c := &Cassette{}
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var t Turn
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return nil, invalid("line %d is not a turn object: %v", line, err)
		}
		if len(c.Turns) >= MaxTurns {
			return nil, invalid("it holds more than %d turns", MaxTurns)
		}
		if want := lastTurn(c) + 1; t.Turn != want && (t.Turn != want-1 || want == 1) {
			return nil, invalid("line %d is turn %d, expected turn %d (turns are numbered from 1, in order; a turn answered more than once repeats its number on consecutive lines)", line, t.Turn, want)
		}
		normalize(&t)
		if err := checkTurn(t); err != nil {
			return nil, invalid("line %d (turn %d): %v", line, t.Turn, err)
		}
		c.Turns = append(c.Turns, t)
	}
	if err := sc.Err(); err != nil {
		return nil, invalid("line %d: %v", line+1, err)
	}
	if len(c.Turns) == 0 {
		return nil, invalid("it holds no turns")
	}
	return c, nil
}

func lastTurn(c *Cassette) int {
	if len(c.Turns) == 0 {
		return 0
	}
	return c.Turns[len(c.Turns)-1].Turn
}

// normalize restores a valid call's end arguments to the exact bytes of
// its deltas when they are the same JSON: encoding/json compacts raw JSON
// when it writes a cassette, while the event contract wants them equal.
func normalize(t *Turn) {
	deltas := map[string]*strings.Builder{}
	for i, e := range t.Events {
		switch {
		case e.ToolCallStart != nil:
			deltas[e.ToolCallStart.CallID] = &strings.Builder{}
		case e.ToolCallDelta != nil:
			if b := deltas[e.ToolCallDelta.CallID]; b != nil {
				b.WriteString(e.ToolCallDelta.ArgumentsDelta)
			}
		case e.ToolCallEnd != nil && e.ToolCallEnd.Invalid == nil:
			b := deltas[e.ToolCallEnd.CallID]
			if b == nil || b.Len() == 0 || string(e.ToolCallEnd.Arguments) == b.String() {
				continue
			}
			if sameJSON(e.ToolCallEnd.Arguments, []byte(b.String())) {
				end := *e.ToolCallEnd
				end.Arguments = json.RawMessage(b.String())
				t.Events[i].ToolCallEnd = &end
			}
		}
	}
}

// sameJSON reports whether a and b are one JSON value, however encoded:
// compacted, re-indented, or with "<" written as \u003c by an encoder
// that escapes HTML (encoding/json does, on every hop through JSON).
func sameJSON(a, b []byte) bool {
	decode := func(p []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(p))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil || d.More() {
			return nil, false
		}
		return v, true
	}
	x, ok1 := decode(a)
	y, ok2 := decode(b)
	return ok1 && ok2 && reflect.DeepEqual(x, y)
}

func checkTurn(t Turn) error {
	if t.DelayMS < 0 || t.DelayMS > MaxDelayMS {
		return fmt.Errorf("delay_ms %d is outside 0..%d", t.DelayMS, MaxDelayMS)
	}
	if t.RequestSHA256 != "" {
		if b, err := hex.DecodeString(t.RequestSHA256); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("request_sha256 is not 64 hex digits")
		}
	}
	turn := provider.NewTurn()
	for i, e := range t.Events {
		if err := turn.Add(e); err != nil {
			return fmt.Errorf("event %d: %v", i+1, err)
		}
	}
	return turn.End()
}

// Match returns the recorded turn answering req, or a CodeExhausted /
// CodeMismatch error naming the turn and what differed.
func (c *Cassette) Match(req provider.ChatRequest) (Turn, error) {
	n := TurnOf(req)
	got := RequestHash(req)
	var lines, fit []Turn
	for _, t := range c.Turns {
		if t.Turn == n {
			lines = append(lines, t)
			if t.RequestSHA256 == "" || t.RequestSHA256 == got {
				fit = append(fit, t)
			}
		}
	}
	key := fmt.Sprintf("%d\x00%s", n, got)
	if len(fit) == 0 && got != "" {
		// After the agent summarised the conversation, TurnOf no longer
		// says where a request stands: the summary request carries no
		// assistant message, and the requests after it carry only the
		// recent ones, while the recording numbered every turn in order.
		// Such a request is found by its hash among all turns (identical
		// ones in order).
		for _, t := range c.Turns {
			if t.RequestSHA256 == got {
				fit = append(fit, t)
			}
		}
		key = "*\x00" + got
	}
	if len(lines) == 0 && len(fit) == 0 {
		return Turn{}, uerr.New(CodeExhausted, fmt.Sprintf("the replay cassette has no turn %d", n),
			fmt.Sprintf("it recorded %d turn(s) and the conversation asks for turn %d (%s)", lastTurn(c), n, describe(req)),
			"record a longer cassette, or lower agent.max_turns for this replay")
	}
	if len(fit) == 0 {
		t := lines[0]
		why := fmt.Sprintf("turn %d was recorded for a request whose last message hashes to %s", n, t.RequestSHA256[:12])
		if len(lines) > 1 {
			why = fmt.Sprintf("turn %d was recorded for %d requests, none with this request's hash; the first hashes to %s", n, len(lines), t.RequestSHA256[:12])
		}
		if t.Request != "" {
			why += " (" + printable(t.Request) + ")"
		}
		why += fmt.Sprintf("; this request's last message hashes to %s (%s)", safePrefix(got, 12), describe(req))
		return Turn{}, uerr.New(CodeMismatch, fmt.Sprintf("turn %d of the conversation differs from the replay cassette", n), why,
			"the conversation diverged from the recording: re-record the cassette, or drop request_sha256 from that turn to replay it regardless")
	}
	if len(fit) == 1 {
		return fit[0], nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.served == nil {
		c.served = map[string]int{}
	}
	i := min(c.served[key], len(fit)-1)
	c.served[key]++
	return fit[i], nil
}

func safePrefix(s string, n int) string {
	if len(s) < n {
		return s
	}
	return s[:n]
}

// printable escapes control characters of untrusted text and bounds it.
func printable(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
