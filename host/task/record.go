package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

// recorder turns the provider turns of a task run with recording on
// (`fluffy --record FILE`) into cassette lines, so a session with a real
// model replays offline through provider-replay.
//
// Only turns that ended with done are written: a failed or cancelled turn
// is retried or ends the task, and is not a turn of the conversation the
// replay has to answer. The secrets the kernel hands to plugins are blanked
// from every line, although no provider event should carry them.
type recorder struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	w       *cassette.Writer
	secrets []string
}

func newRecorder(secrets []string) *recorder {
	r := &recorder{secrets: secrets}
	r.w = cassette.NewWriter(&r.buf)
	return r
}

// redacted replaces what a cassette must never hold.
const redacted = "[REDACTED]"

// turn is the cassette line (without newline) for one provider turn, or
// nil when the turn is not recorded.
func (r *recorder) turn(req provider.ChatRequest, events []provider.Event) (json.RawMessage, error) {
	if len(events) == 0 || events[len(events)-1].Done == nil {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf.Reset()
	if err := r.w.Add(req, events); err != nil {
		return nil, fmt.Errorf("record turn: %w", err)
	}
	line := bytes.TrimSuffix(r.buf.Bytes(), []byte("\n"))
	for _, s := range r.secrets {
		line = bytes.ReplaceAll(line, []byte(s), []byte(redacted))
		if q, err := json.Marshal(s); err == nil {
			line = bytes.ReplaceAll(line, q[1:len(q)-1], []byte(redacted))
		}
	}
	return append(json.RawMessage(nil), line...), nil
}

// ConfigSecrets collects the secret values of the plugins' configurations
// (string values under a key naming a key, token, secret or password),
// longest first so a secret containing another is blanked whole.
func ConfigSecrets(cfgs map[string][]byte) []string {
	var out []string
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, vv := range x {
				walk(k, vv)
			}
		case []any:
			for _, vv := range x {
				walk(key, vv)
			}
		case string:
			k := strings.ToLower(key)
			if len(x) >= 8 && (strings.Contains(k, "key") || strings.Contains(k, "token") || strings.Contains(k, "secret") || strings.Contains(k, "password")) {
				out = append(out, x)
			}
		}
	}
	for _, b := range cfgs {
		var v any
		if json.Unmarshal(b, &v) == nil {
			walk("", v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// recording is the running task's recorder, nil when it does not record.
func (t *Tasks) recording() *recorder {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rec
}

// record emits the turn's cassette line into the task's stream. A turn
// that cannot be recorded (the cassette's size limit) stops the recording
// with a notice; the task goes on.
func (t *Tasks) record(rec *recorder, req provider.ChatRequest, events []provider.Event) {
	line, err := rec.turn(req, events)
	if err != nil {
		t.mu.Lock()
		if t.rec == rec {
			t.rec = nil
		}
		t.mu.Unlock()
		t.ag.Emit(agent.Event{Type: agent.EventNotice, Text: "recording stopped: " + err.Error()})
		return
	}
	if line != nil {
		t.ag.Emit(agent.Event{Type: agent.EventRecorded, Recorded: line})
	}
}
