package fakes

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Scenarios the server can play.
const (
	ScenarioText     = "text"
	ScenarioToolCall = "toolcall"
	ScenarioSlow     = "slow"
	ScenarioError    = "error"
)

// Scripted content the suite checks against.
var (
	TextDeltas   = []string{"Hel", "lo, ", "confor", "mance ", "wor", "ld", "!"}
	ToolCallID   = "call_conf_1"
	ToolCallName = "fs.read"
	ToolArgParts = []string{`{"pa`, `th": "REA`, `DME.md", "li`, `mit": 5}`}
)

// Server is a fake model endpoint. Base URL: URL()+"/v1".
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	scenario string
	requests []string // paths
	conns    int      // TCP connections accepted
	closed   chan struct{}
}

// New starts a fake on loopback. Close it when done.
func New() *Server {
	s := &Server{scenario: ScenarioText, closed: make(chan struct{}, 16)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.openai)
	mux.HandleFunc("POST /v1/messages", s.anthropic)
	s.srv = httptest.NewUnstartedServer(mux)
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	s.srv.Start()
	return s
}

// Target is the server's host:port, as a CONNECT proxy is asked for it.
func (s *Server) Target() string { return s.srv.Listener.Addr().String() }

// Conns is how many TCP connections the server has accepted so far.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// URL is the server's root URL (http://127.0.0.1:port).
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SetScenario selects what the next requests get.
func (s *Server) SetScenario(sc string) {
	s.mu.Lock()
	s.scenario = sc
	s.mu.Unlock()
}

// Requests returns the paths requested so far.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// StreamClosed receives once per slow stream whose client went away.
func (s *Server) StreamClosed() <-chan struct{} { return s.closed }

func (s *Server) begin(r *http.Request) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.URL.Path)
	return s.scenario
}

func sse(w http.ResponseWriter, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

func (s *Server) slow(w http.ResponseWriter, r *http.Request, send func(i int)) {
	for i := 0; ; i++ {
		send(i)
		select {
		case <-r.Context().Done():
			s.closed <- struct{}{}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if i > 30 {
			return
		}
	}
}

func (s *Server) openai(w http.ResponseWriter, r *http.Request) {
	sc := s.begin(r)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": "chatcmpl-conf", "object": "chat.completion.chunk", "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	switch sc {
	case ScenarioError:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"rate limit reached for fake model","type":"rate_limit_error","code":"rate_limit_exceeded"}}`))
		return
	case ScenarioSlow:
		startSSE(w)
		s.slow(w, r, func(int) { sse(w, "", chunk(map[string]any{"content": "tick "}, nil)) })
		return
	}
	startSSE(w)
	sse(w, "", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if sc == ScenarioToolCall {
		for i, part := range ToolArgParts {
			tc := map[string]any{"index": 0, "function": map[string]any{"arguments": part}}
			if i == 0 {
				tc["id"], tc["type"] = ToolCallID, "function"
				tc["function"] = map[string]any{"name": ToolCallName, "arguments": part}
			}
			sse(w, "", chunk(map[string]any{"tool_calls": []any{tc}}, nil))
		}
		sse(w, "", chunk(map[string]any{}, "tool_calls"))
	} else {
		for _, d := range TextDeltas {
			sse(w, "", chunk(map[string]any{"content": d}, nil))
		}
		sse(w, "", chunk(map[string]any{}, "stop"))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request) {
	sc := s.begin(r)
	switch sc {
	case ScenarioError:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"api_error","message":"fake upstream failure"}}`))
		return
	}
	startSSE(w)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_conf", "role": "assistant", "content": []any{}, "usage": map[string]any{"input_tokens": 3, "output_tokens": 0}}})
	switch sc {
	case ScenarioSlow:
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		s.slow(w, r, func(int) {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "tick "}})
		})
		return
	case ScenarioToolCall:
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": ToolCallID, "name": ToolCallName, "input": map[string]any{}}})
		for _, part := range ToolArgParts {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use"}, "usage": map[string]any{"output_tokens": 9}})
	default:
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "ping", map[string]any{"type": "ping"})
		for _, d := range TextDeltas {
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": d}})
		}
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": 7}})
	}
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// Text is the assembled scripted text.
func Text() string { return strings.Join(TextDeltas, "") }

// ToolArgs is the assembled scripted tool-call arguments.
func ToolArgs() string { return strings.Join(ToolArgParts, "") }
