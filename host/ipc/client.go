package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Client is one connection to a kernel. Calls may run concurrently.
type Client struct {
	c       *conn
	mu      sync.Mutex
	pending map[string]*pending
	done    chan struct{}
	err     error // why the connection ended; set before done closes
}

type pending struct {
	onEvent func(json.RawMessage)
	resp    chan Message
}

// Dial connects to the kernel socket at path.
func Dial(ctx context.Context, path string, maxFrame int) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, uerr.Wrap(err, "IPC_UNREACHABLE", "cannot reach the fluffy kernel at "+path, err.Error(),
			"start it with `fluffy kernel`, or run `fluffy` which starts one")
	}
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	cl := &Client{c: &conn{nc: nc, max: maxFrame}, pending: map[string]*pending{}, done: make(chan struct{})}
	go cl.readLoop()
	return cl, nil
}

// Close hangs up.
func (cl *Client) Close() error { return cl.c.nc.Close() }

// Done is closed when the connection ends; Err says why.
func (cl *Client) Done() <-chan struct{} { return cl.done }

// Err is why the connection ended (nil while it is open).
func (cl *Client) Err() error {
	select {
	case <-cl.done:
		return cl.err
	default:
		return nil
	}
}

func (cl *Client) readLoop() {
	var err error
	defer func() {
		if err == nil {
			err = uerr.New(CodeClosed, "the kernel closed the connection", "it stopped or restarted", "run the command again; `fluffy attach` reconnects to a running task")
		}
		cl.mu.Lock()
		cl.err = err
		ps := cl.pending
		cl.pending = map[string]*pending{}
		cl.mu.Unlock()
		close(cl.done)
		for _, p := range ps {
			close(p.resp)
		}
	}()
	for {
		b, rerr := ReadFrame(cl.c.nc, cl.c.max)
		if rerr != nil {
			var fe *FrameError
			if errors.As(rerr, &fe) {
				err = uerr.New(fe.Code, "the kernel sent a frame this client cannot read", fe.Msg, "use a fluffy client of the same version as the kernel")
			}
			return
		}
		m, derr := decode(b)
		if derr != nil {
			err = uerr.New(CodeBadFrame, "the kernel sent a message this client cannot read", derr.Error(), "use a fluffy client of the same version as the kernel")
			return
		}
		if m.ID == "-" && m.Error != nil { // connection-level refusal
			err = m.Error.UserError()
			return
		}
		cl.mu.Lock()
		p := cl.pending[m.ID]
		if m.Type == TypeResponse {
			delete(cl.pending, m.ID)
		}
		cl.mu.Unlock()
		if p == nil {
			continue
		}
		switch m.Type {
		case TypeEvent:
			if p.onEvent != nil {
				p.onEvent(m.Result)
			}
		case TypeResponse:
			p.resp <- m
		}
	}
}

// Call sends a request and waits for its response, handing every event of
// the request to onEvent (in order, on the reading goroutine: keep it
// quick). Cancelling ctx asks the kernel to cancel the request and returns
// ctx's error.
func (cl *Client) Call(ctx context.Context, method string, params any, onEvent func(json.RawMessage)) (json.RawMessage, error) {
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("encode %s params: %w", method, err)
		}
		raw = b
	}
	id := NewID()
	p := &pending{onEvent: onEvent, resp: make(chan Message, 1)}
	cl.mu.Lock()
	select {
	case <-cl.done:
		cl.mu.Unlock()
		return nil, cl.err
	default:
	}
	cl.pending[id] = p
	cl.mu.Unlock()
	if err := cl.c.send(Message{ID: id, Type: TypeRequest, Method: method, Params: raw}); err != nil {
		cl.mu.Lock()
		delete(cl.pending, id)
		cl.mu.Unlock()
		// The kernel may have hung up with a reason (a refused peer):
		// that reason is what the user needs, not "broken pipe".
		select {
		case <-cl.done:
			if cl.err != nil {
				return nil, cl.err
			}
		case <-time.After(time.Second):
		}
		return nil, fmt.Errorf("send %s: %w", method, err)
	}
	select {
	case m, ok := <-p.resp:
		if !ok {
			return nil, cl.err
		}
		if m.Error != nil {
			return nil, m.Error.UserError()
		}
		return m.Result, nil
	case <-ctx.Done():
		_ = cl.c.send(Message{ID: NewID(), Type: TypeRequest, Method: MethodCancel, Params: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))})
		cl.mu.Lock()
		delete(cl.pending, id)
		cl.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Ping measures one round trip.
func (cl *Client) Ping(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	res, err := cl.Call(ctx, MethodPing, nil, nil)
	if err != nil {
		return 0, err
	}
	if string(res) != `"pong"` {
		return 0, fmt.Errorf("ping: unexpected answer %s", res)
	}
	return time.Since(start), nil
}
