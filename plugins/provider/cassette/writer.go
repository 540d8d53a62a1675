package cassette

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
)

// Writer writes a cassette, one turn per line, numbering turns from 1.
// Every turn is checked against the provider event contract before it is
// written, so what a Writer writes, Parse reads. Safe for concurrent use.
type Writer struct {
	mu    sync.Mutex
	w     io.Writer
	n     int
	bytes int
	// CheckRequests makes Add store each request's RequestHash, so replay
	// refuses a conversation that diverges from the recording.
	CheckRequests bool
}

// NewWriter returns a Writer appending to w, checking requests by hash.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, CheckRequests: true} }

// Add writes the next turn: the answer events to req. Events should not
// carry secrets; provider events never hold the API key.
func (w *Writer) Add(req provider.ChatRequest, events []provider.Event) error {
	return w.AddTurn(req, Turn{Events: events})
}

// AddTurn writes t as the next turn (its Turn number is set by the
// writer; RequestSHA256 and Request from req when CheckRequests is set and
// t has none).
func (w *Writer) AddTurn(req provider.ChatRequest, t Turn) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Turn = w.n + 1
	if w.CheckRequests && t.RequestSHA256 == "" && len(req.Messages) > 0 {
		t.RequestSHA256 = RequestHash(req)
		t.Request = describe(req)
	}
	t.Events = append([]provider.Event(nil), t.Events...)
	normalize(&t)
	if err := checkTurn(t); err != nil {
		return fmt.Errorf("cassette turn %d: %w", t.Turn, err)
	}
	// No HTML escaping: encoding/json would write a raw argument's "<" as
	// \u003c, and the arguments would no longer equal their deltas' text
	// when the cassette is read back (source code is full of < and &).
	var enc bytes.Buffer
	je := json.NewEncoder(&enc)
	je.SetEscapeHTML(false)
	if err := je.Encode(t); err != nil {
		return fmt.Errorf("cassette turn %d: %w", t.Turn, err)
	}
	b := enc.Bytes()
	if w.bytes+len(b) > MaxBytes || t.Turn > MaxTurns {
		return fmt.Errorf("cassette turn %d: the cassette would exceed %d bytes or %d turns", t.Turn, MaxBytes, MaxTurns)
	}
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("cassette turn %d: %w", t.Turn, err)
	}
	w.n++
	w.bytes += len(b)
	return nil
}

// Turns is the number of turns written.
func (w *Writer) Turns() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Recorder records one live turn: wrap the onEvent callback given to
// provider.Client.Chat with Observe, then call Finish. A turn that ended
// without done or error (cancelled, transport failure) is not written.
type Recorder struct {
	w      *Writer
	req    provider.ChatRequest
	events []provider.Event
}

// Record starts recording the answer to req.
func (w *Writer) Record(req provider.ChatRequest) *Recorder {
	return &Recorder{w: w, req: req}
}

// Observe returns onEvent wrapped so every event is also recorded.
func (r *Recorder) Observe(onEvent func(provider.Event)) func(provider.Event) {
	return func(e provider.Event) {
		r.events = append(r.events, e)
		if onEvent != nil {
			onEvent(e)
		}
	}
}

// Finish writes the recorded turn. It reports false (and writes nothing)
// when the turn did not end with done or an error event.
func (r *Recorder) Finish() (bool, error) {
	t := provider.NewTurn()
	for _, e := range r.events {
		if t.Add(e) != nil {
			return false, nil
		}
	}
	if !t.Ended() {
		return false, nil
	}
	return true, r.w.Add(r.req, r.events)
}
