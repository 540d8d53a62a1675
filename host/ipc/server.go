package ipc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Methods the channel answers itself, before any handler: the bootstrap's
// health check must not depend on kernel logic.
const (
	MethodPing   = "ping"
	MethodCancel = "ipc.cancel"
)

// Peer is the identity of the process at the other end (SO_PEERCRED).
type Peer struct {
	PID int
	UID int
	GID int
}

// Handler serves requests. It is called in its own goroutine per request;
// it may stream events with req.Emit before returning the result.
type Handler interface {
	ServeIPC(ctx context.Context, req *Request) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// ServeIPC implements Handler.
func (f HandlerFunc) ServeIPC(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// Request is one request being served.
type Request struct {
	ID     string
	Method string
	Params json.RawMessage
	Peer   Peer
	c      *conn
}

// Emit sends an event for this request (same id, type "event"). It fails
// once the client is gone; handlers that outlive the connection should
// stop emitting then.
func (r *Request) Emit(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	return r.c.send(Message{ID: r.ID, Type: TypeEvent, Result: b})
}

// Server accepts connections on a unix socket and hands requests to
// Handler. Only peers with this process's uid are served.
type Server struct {
	Handler Handler
	Logger  hclog.Logger
	// MaxFrame bounds frames both ways (default DefaultMaxFrame).
	MaxFrame int
	// MaxInFlight bounds concurrent requests per connection (default 64).
	MaxInFlight int
	// OnRefused hears every refused peer (the kernel audits them).
	OnRefused func(p Peer, reason string)
	// UID is the only uid served (default os.Getuid()).
	UID *int
	// ConnState hears every accepted (open=true) and ended (open=false)
	// connection of an admitted peer, e.g. to exit when idle.
	ConnState func(p Peer, open bool)
}

// Listen creates the socket at path: its directory 0700, the socket 0600,
// a stale socket (nobody answering) replaced, a live one refused.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("ipc socket dir: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, uerr.New("IPC_SOCKET_IN_USE", "cannot create the kernel socket "+path,
				"a file that is not a socket is in the way", "move or remove "+path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, uerr.New("IPC_SOCKET_IN_USE", "a kernel already listens on "+path,
				"one kernel serves one project", "attach to it with `fluffy attach`, or stop it first")
		}
		_ = os.Remove(path) // stale: its kernel died
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return l, nil
}

// Serve accepts until ctx ends or l is closed.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	if s.Logger == nil {
		s.Logger = hclog.NewNullLogger()
	}
	go func() { <-ctx.Done(); l.Close() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		nc, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("ipc accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, nc)
		}()
	}
}

func (s *Server) maxFrame() int {
	if s.MaxFrame > 0 {
		return s.MaxFrame
	}
	return DefaultMaxFrame
}

// PeerOf reads the peer credentials of a unix connection.
func PeerOf(nc net.Conn) (Peer, error) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return Peer{}, fmt.Errorf("not a unix connection: %T", nc)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, fmt.Errorf("SO_PEERCRED: %w", cerr)
	}
	return Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, nil
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	defer nc.Close()
	c := &conn{nc: nc, max: s.maxFrame(), inflight: map[string]context.CancelFunc{}}
	peer, err := PeerOf(nc)
	want := os.Getuid()
	if s.UID != nil {
		want = *s.UID
	}
	if err != nil || peer.UID != want {
		reason := fmt.Sprintf("peer uid %d is not the kernel's uid %d", peer.UID, want)
		if err != nil {
			reason = "peer credentials unavailable: " + err.Error()
		}
		s.Logger.Warn("refused an IPC client", "pid", peer.PID, "uid", peer.UID, "reason", reason)
		if s.OnRefused != nil {
			s.OnRefused(peer, reason)
		}
		_ = c.send(Message{ID: "-", Type: TypeResponse, Error: &Error{Code: CodePeerRefused,
			Message: "the kernel refused this connection", Why: reason,
			Fix: "run fluffy as the user who started the kernel"}})
		return
	}
	if s.ConnState != nil {
		s.ConnState(peer, true)
		defer s.ConnState(peer, false)
	}
	cctx, cancel := context.WithCancel(ctx)
	// Server shutdown hangs up on clients (unblocking the read below).
	go func() { <-cctx.Done(); nc.Close() }()
	limit := s.MaxInFlight
	if limit <= 0 {
		limit = 64
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	// A hung-up client cancels its requests (handlers that must outlive
	// the connection detach their work from ctx), then we wait for them.
	defer func() { cancel(); wg.Wait() }()
	for {
		b, err := ReadFrame(nc, c.max)
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) {
				// The stream position is lost: say why, then hang up.
				s.Logger.Warn("bad IPC frame; closing the connection", "pid", peer.PID, "error", fe)
				_ = c.send(Message{ID: "-", Type: TypeResponse, Error: &Error{Code: fe.Code, Message: fe.Msg,
					Why: "the client sent a frame the kernel cannot read", Fix: "use a fluffy client of the same version"}})
			}
			return
		}
		m, err := decode(b)
		if err != nil {
			fe := err.(*FrameError)
			_ = c.send(Message{ID: "-", Type: TypeResponse, Error: &Error{Code: fe.Code, Message: fe.Msg,
				Why: "the client sent a message the kernel cannot read", Fix: "use a fluffy client of the same version"}})
			return
		}
		if m.Type != TypeRequest {
			continue // clients send only requests; ignore the rest
		}
		switch m.Method {
		case MethodPing:
			_ = c.send(Message{ID: m.ID, Type: TypeResponse, Result: json.RawMessage(`"pong"`)})
			continue
		case MethodCancel:
			var p struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(m.Params, &p)
			c.cancel(p.ID)
			_ = c.send(Message{ID: m.ID, Type: TypeResponse, Result: json.RawMessage(`true`)})
			continue
		}
		select {
		case sem <- struct{}{}:
		default:
			_ = c.send(Message{ID: m.ID, Type: TypeResponse, Error: &Error{Code: "IPC_BUSY", Retryable: true,
				Message: fmt.Sprintf("more than %d requests in flight on this connection", limit),
				Fix:     "wait for earlier requests to finish"}})
			continue
		}
		rctx, rcancel := context.WithCancel(cctx)
		if !c.track(m.ID, rcancel) {
			rcancel()
			<-sem
			_ = c.send(Message{ID: m.ID, Type: TypeResponse, Error: &Error{Code: CodeBadFrame,
				Message: "request id " + m.ID + " is already in flight", Fix: "use a fresh id per request"}})
			continue
		}
		wg.Add(1)
		go func(m Message) {
			defer wg.Done()
			defer func() { <-sem }()
			defer c.untrack(m.ID)
			defer rcancel()
			req := &Request{ID: m.ID, Method: m.Method, Params: m.Params, Peer: peer, c: c}
			res, err := s.Handler.ServeIPC(rctx, req)
			out := Message{ID: m.ID, Type: TypeResponse}
			if err != nil {
				out.Error = ErrorFrom(err, false)
			} else if out.Result, err = json.Marshal(res); err != nil {
				out.Error = ErrorFrom(fmt.Errorf("encode result of %s: %w", m.Method, err), false)
				out.Result = nil
			}
			if err := c.send(out); err != nil {
				var fe *FrameError
				if errors.As(err, &fe) {
					_ = c.send(Message{ID: m.ID, Type: TypeResponse, Error: &Error{Code: fe.Code, Message: fe.Msg,
						Why: "the kernel's answer was larger than one frame", Fix: "ask for less (a narrower range, a summary)"}})
				}
			}
		}(m)
	}
}

// conn serialises writes and tracks in-flight requests of one connection.
type conn struct {
	nc       net.Conn
	max      int
	wmu      sync.Mutex
	mu       sync.Mutex
	inflight map[string]context.CancelFunc
}

func (c *conn) send(m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return WriteFrame(c.nc, b, c.max)
}

func (c *conn) track(id string, cancel context.CancelFunc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.inflight[id]; dup {
		return false
	}
	c.inflight[id] = cancel
	return true
}

func (c *conn) untrack(id string) {
	c.mu.Lock()
	delete(c.inflight, id)
	c.mu.Unlock()
}

func (c *conn) cancel(id string) {
	c.mu.Lock()
	f := c.inflight[id]
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// NewID returns a random UUIDv4 (request correlation ids).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
