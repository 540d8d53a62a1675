package ipc

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestMain doubles as a tiny client process for the other-uid test.
func TestMain(m *testing.M) {
	if sock := os.Getenv("FLUFFY_IPC_TEST_CLIENT"); sock != "" {
		cl, err := Dial(context.Background(), sock, 0)
		if err != nil {
			fmt.Println("DIAL", err)
			os.Exit(0)
		}
		_, err = cl.Call(context.Background(), "echo", map[string]string{"x": "y"}, nil)
		fmt.Println("CALL", err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type testServer struct {
	path    string
	cancel  context.CancelFunc
	refused chan Peer
	served  atomic.Int64
}

func shortDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "ipc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func startServer(t *testing.T, h Handler, tweak func(*Server)) *testServer {
	t.Helper()
	ts := &testServer{path: filepath.Join(shortDir(t), "k.sock"), refused: make(chan Peer, 4)}
	l, err := Listen(ts.path)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
		ts.served.Add(1)
		return h.ServeIPC(ctx, r)
	}), OnRefused: func(p Peer, _ string) { ts.refused <- p }}
	if tweak != nil {
		tweak(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ts
}

var echo = HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
	switch r.Method {
	case "echo":
		return r.Params, nil
	case "stream":
		var n int
		_ = json.Unmarshal(r.Params, &n)
		for i := range n {
			if err := r.Emit(map[string]int{"i": i}); err != nil {
				return nil, err
			}
		}
		return n, nil
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case "fail":
		return nil, uerr.New("TASK_FAILED", "it failed", "because", "do better")
	}
	return nil, uerr.New(CodeUnknownMethod, "unknown method "+r.Method, "the kernel does not serve it", "see `fluffy help`")
})

func dial(t *testing.T, path string) *Client {
	t.Helper()
	cl, err := Dial(context.Background(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func TestRoundTripEventsErrorsAndPing(t *testing.T) {
	ts := startServer(t, echo, nil)
	cl := dial(t, ts.path)
	ctx := context.Background()
	res, err := cl.Call(ctx, "echo", map[string]string{"a": "b"}, nil)
	if err != nil || string(res) != `{"a":"b"}` {
		t.Fatalf("echo = %s, %v", res, err)
	}
	var got []int
	res, err = cl.Call(ctx, "stream", 50, func(ev json.RawMessage) {
		var e struct{ I int }
		_ = json.Unmarshal(ev, &e)
		got = append(got, e.I)
	})
	if err != nil || string(res) != "50" || len(got) != 50 || got[0] != 0 || got[49] != 49 {
		t.Fatalf("stream = %s, %v, %d events", res, err, len(got))
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("events out of order: %v", got)
		}
	}
	_, err = cl.Call(ctx, "fail", nil, nil)
	if ue, ok := uerr.As(err); !ok || ue.Code != "TASK_FAILED" || ue.Why != "because" || ue.Fix != "do better" {
		t.Fatalf("structured error lost: %#v", err)
	}
	if _, err := cl.Call(ctx, "nope", nil, nil); !uerr.HasCode(err, CodeUnknownMethod) {
		t.Fatalf("unknown method: %v", err)
	}
	if d, err := cl.Ping(ctx); err != nil || d <= 0 {
		t.Fatalf("ping: %v %v", d, err)
	}
}

func TestCancelReachesHandler(t *testing.T) {
	ts := startServer(t, echo, nil)
	cl := dial(t, ts.path)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := cl.Call(ctx, "block", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	// The connection stays usable.
	if _, err := cl.Call(context.Background(), "echo", 1, nil); err != nil {
		t.Fatal(err)
	}
}

// rawConn writes arbitrary bytes and reads the kernel's answer frame.
func rawExchange(t *testing.T, path string, b []byte) (Message, error) {
	t.Helper()
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(b); err != nil {
		return Message{}, err
	}
	if uc, ok := nc.(*net.UnixConn); ok {
		_ = uc.CloseWrite()
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := ReadFrame(nc, DefaultMaxFrame)
	if err != nil {
		return Message{}, err
	}
	var m Message
	err = json.Unmarshal(f, &m)
	return m, err
}

func frame(payload string) []byte {
	b := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	copy(b[4:], payload)
	return b
}

func TestHostileFrames(t *testing.T) {
	ts := startServer(t, echo, nil)
	huge := []byte{0xff, 0xff, 0xff, 0xff} // 4 GiB declared
	cases := []struct {
		name string
		in   []byte
		code string
	}{
		{"4GiB declared length", append(huge, 'x'), CodeFrameTooLarge},
		{"truncated payload", frame(`{"id":"1","type":"request","method":"echo"}`)[:20], CodeBadFrame},
		{"truncated header", []byte{0, 0}, CodeBadFrame},
		{"garbage", frame("\x00\x01garbage\xff"), CodeBadFrame},
		{"json but not a message", frame(`[1,2,3]`), CodeBadFrame},
		{"unknown type", frame(`{"id":"1","type":"shout"}`), CodeBadFrame},
		{"request without method", frame(`{"id":"1","type":"request"}`), CodeBadFrame},
		{"empty frame", frame(""), CodeBadFrame},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := rawExchange(t, ts.path, c.in)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if m.Error == nil || m.Error.Code != c.code || m.Error.Why == "" || m.Error.Fix == "" {
				t.Fatalf("answer = %+v, want %s with why/fix", m, c.code)
			}
		})
	}
	if n := ts.served.Load(); n != 0 {
		t.Fatalf("handler saw %d hostile requests", n)
	}
	// The kernel still serves well-formed clients.
	if _, err := dial(t, ts.path).Call(context.Background(), "echo", 1, nil); err != nil {
		t.Fatal(err)
	}
}

func TestTwoClientsAtOnce(t *testing.T) {
	ts := startServer(t, echo, nil)
	a, b := dial(t, ts.path), dial(t, ts.path)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 50 { // under the per-connection in-flight limit
		for _, cl := range []*Client{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := cl.Call(context.Background(), "echo", i, nil)
				if err != nil || string(res) != fmt.Sprint(i) {
					errs <- fmt.Errorf("call %d: %s %v", i, res, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestDisconnectCancelsRequests(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	ts := startServer(t, HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	}), nil)
	cl := dial(t, ts.path)
	go func() { _, _ = cl.Call(context.Background(), "long", nil, nil) }()
	<-started
	cl.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler not cancelled after the client hung up")
	}
}

func TestOversizedResponseIsAnError(t *testing.T) {
	ts := startServer(t, HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
		return strings.Repeat("x", 2<<20), nil
	}), func(s *Server) { s.MaxFrame = 1 << 20 })
	_, err := dial(t, ts.path).Call(context.Background(), "big", nil, nil)
	if !uerr.HasCode(err, CodeFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
}

func TestSecondListenerRefusedStaleSocketReplaced(t *testing.T) {
	ts := startServer(t, echo, nil)
	if _, err := Listen(ts.path); !uerr.HasCode(err, "IPC_SOCKET_IN_USE") {
		t.Fatalf("second listen: %v", err)
	}
	stale := filepath.Join(shortDir(t), "s.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	l2, err := Listen(stale)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	l2.Close()
	if fi, _ := os.Stat(ts.path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode().Perm())
	}
}

// TestOtherUIDRefused: a client running as another uid reaches the socket
// (made world-writable for the test) and is refused by SO_PEERCRED.
func TestOtherUIDRefused(t *testing.T) {
	if os.Getuid() != 0 {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatal("CI runs as root; this test needs root to run a client under another uid")
		}
		t.Skip("needs root to start a client under another uid (setpriv)")
	}
	ts := startServer(t, echo, nil)
	_ = os.Chmod(filepath.Dir(ts.path), 0o755)
	_ = os.Chmod(ts.path, 0o666)
	bin := filepath.Join(shortDir(t), "client")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Dir(bin), 0o755)
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^$")
	cmd.Env = []string{"FLUFFY_IPC_TEST_CLIENT=" + ts.path}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte(CodePeerRefused)) {
		t.Fatalf("other-uid client was not refused: %s", out)
	}
	select {
	case p := <-ts.refused:
		if p.UID != 65534 {
			t.Fatalf("refused peer %+v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("refusal not reported")
	}
	if n := ts.served.Load(); n != 0 {
		t.Fatalf("handler served %d requests of a foreign uid", n)
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

func BenchmarkPing(b *testing.B) {
	d, _ := os.MkdirTemp("", "ipcb")
	defer os.RemoveAll(d)
	path := filepath.Join(d, "k.sock")
	l, err := Listen(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = (&Server{Handler: echo}).Serve(ctx, l) }()
	cl, err := Dial(ctx, path, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	b.ResetTimer()
	for b.Loop() {
		if _, err := cl.Ping(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func TestInFlightLimit(t *testing.T) {
	release := make(chan struct{})
	ts := startServer(t, HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
		if r.Method == "block" {
			<-release
		}
		return 1, nil
	}), func(s *Server) { s.MaxInFlight = 2 })
	cl := dial(t, ts.path)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = cl.Call(context.Background(), "block", nil, nil) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for ts.served.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	_, err := cl.Call(context.Background(), "quick", nil, nil)
	if ue, ok := uerr.As(err); !ok || ue.Code != "IPC_BUSY" {
		t.Fatalf("third request = %v, want IPC_BUSY", err)
	}
	close(release)
	wg.Wait()
	if _, err := cl.Call(context.Background(), "quick", nil, nil); err != nil {
		t.Fatalf("after the limit cleared: %v", err)
	}
}
