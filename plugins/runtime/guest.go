package runtime

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// EnvExitWhenOrphaned is set by the sandbox launcher in every plugin it
// starts. A plugin serving with GuestGRPCServer then exits once the kernel's
// connection is gone, so a SIGKILLed kernel leaves no running container.
const EnvExitWhenOrphaned = "FLUFFY_EXIT_WHEN_ORPHANED"

// OrphanGrace is how long a plugin waits, after its last kernel connection
// closed, before it exits. Well under the 5 s the issue allows.
const OrphanGrace = 500 * time.Millisecond

// FirstConnTimeout bounds how long a sandboxed plugin waits for the kernel to
// connect after the handshake before it gives up and exits. The kernel dials
// within milliseconds of the handshake line; a plugin whose container came
// up after its kernel died (a start racing a SIGKILL) must still be gone
// within the 5 s the design allows.
const FirstConnTimeout = 4 * time.Second

// GuestGRPCServer returns a go-plugin ServeConfig.GRPCServer function. When
// EnvExitWhenOrphaned is set it tracks the kernel's connections and calls
// exit (os.Exit when nil) with status 3 once none has been open for
// OrphanGrace (or none arrived within FirstConnTimeout). Without the variable
// it is plugin.DefaultGRPCServer.
func GuestGRPCServer(exit func(code int)) func([]grpc.ServerOption) *grpc.Server {
	return func(opts []grpc.ServerOption) *grpc.Server {
		if os.Getenv(EnvExitWhenOrphaned) == "" {
			return grpc.NewServer(opts...)
		}
		if exit == nil {
			exit = os.Exit
		}
		w := newOrphanWatch(exit, OrphanGrace, FirstConnTimeout)
		return grpc.NewServer(append(opts, grpc.StatsHandler(w))...)
	}
}

// orphanWatch is a gRPC stats handler that counts live connections.
type orphanWatch struct {
	exit  func(int)
	grace time.Duration

	mu    sync.Mutex
	open  int
	gen   int
	timer *time.Timer
}

func newOrphanWatch(exit func(int), grace, first time.Duration) *orphanWatch {
	w := &orphanWatch{exit: exit, grace: grace}
	w.timer = time.AfterFunc(first, w.fire(0))
	return w
}

func (w *orphanWatch) fire(gen int) func() {
	return func() {
		w.mu.Lock()
		orphaned := w.open == 0 && w.gen == gen
		w.mu.Unlock()
		if orphaned {
			w.exit(3)
		}
	}
}

func (w *orphanWatch) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (w *orphanWatch) HandleRPC(context.Context, stats.RPCStats)                         {}
func (w *orphanWatch) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (w *orphanWatch) HandleConn(_ context.Context, s stats.ConnStats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch s.(type) {
	case *stats.ConnBegin:
		w.open++
		w.gen++
		w.timer.Stop()
	case *stats.ConnEnd:
		w.open--
		if w.open <= 0 {
			w.open = 0
			w.gen++
			w.timer = time.AfterFunc(w.grace, w.fire(w.gen))
		}
	}
}

// EnvProxySocket names the unix socket of the kernel's CONNECT proxy inside
// a sandbox whose template allows network through the proxy.
const EnvProxySocket = "FLUFFY_PROXY_SOCKET"

// DialViaProxy opens a TCP tunnel to addr (host:port) through the kernel's
// CONNECT proxy. Use it as http.Transport.DialContext in provider plugins.
// The kernel refuses hosts outside the policy's allowlist with an error that
// names the host.
func DialViaProxy(ctx context.Context, _ string, addr string) (net.Conn, error) {
	sock := os.Getenv(EnvProxySocket)
	if sock == "" {
		return nil, fmt.Errorf("dial %s: no network in this sandbox (%s is not set)", addr, EnvProxySocket)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, fmt.Errorf("dial %s via proxy: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr); err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s via proxy: %w", addr, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("dial %s via proxy: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		conn.Close()
		return nil, fmt.Errorf("dial %s via proxy: %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	_ = conn.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: conn, r: br}, nil
	}
	return conn, nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
