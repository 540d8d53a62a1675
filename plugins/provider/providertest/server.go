package providertest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
)

// Script is one scripted response.
type Script struct {
	Status int               // default 200
	Header map[string]string // Content-Type defaults to text/event-stream
	// Chunks are written in order, each flushed on its own.
	Chunks []string
	// Hang keeps the response open after the chunks until the client goes
	// away (Server.Closed then receives).
	Hang bool
	// Reset drops the connection (TCP RST) before any byte of the answer.
	Reset bool
	// Drop closes the connection after the chunks without ending the
	// response: the client reads an unexpected EOF mid-stream.
	Drop bool
}

// Request is what the server was asked.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// Server is the fake upstream. Its scripts are served in order; when they
// run out the last one repeats.
type Server struct {
	srv *httptest.Server

	mu       sync.Mutex
	scripts  []Script
	next     int
	requests []Request
	closed   chan struct{}
}

// New starts a server on 127.0.0.1. Close it when done.
func New() *Server {
	s := &Server{closed: make(chan struct{}, 64)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is http://127.0.0.1:port.
func (s *Server) URL() string { return s.srv.URL }

// Addr is 127.0.0.1:port.
func (s *Server) Addr() string { return s.srv.Listener.Addr().String() }

// Close stops the server.
func (s *Server) Close() { s.srv.CloseClientConnections(); s.srv.Close() }

// Play sets the scripts the next requests get, in order.
func (s *Server) Play(scripts ...Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts, s.next = scripts, 0
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Closed receives once for every hanging response whose client went away.
func (s *Server) Closed() <-chan struct{} { return s.closed }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	var sc Script
	if len(s.scripts) > 0 {
		i := s.next
		if i >= len(s.scripts) {
			i = len(s.scripts) - 1
		}
		sc = s.scripts[i]
		s.next++
	}
	s.mu.Unlock()
	if sc.Reset {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0)
				}
				conn.Close()
			}
		}
		return
	}
	if sc.Status == 0 {
		sc.Status = http.StatusOK
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for k, v := range sc.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(sc.Status)
	f, _ := w.(http.Flusher)
	for _, c := range sc.Chunks {
		if _, err := io.WriteString(w, c); err != nil {
			return
		}
		if f != nil {
			f.Flush()
		}
	}
	if sc.Drop {
		// The server closes the connection without the terminating
		// chunk when a handler aborts.
		panic(http.ErrAbortHandler)
	}
	if sc.Hang {
		<-r.Context().Done()
		s.closed <- struct{}{}
	}
}
