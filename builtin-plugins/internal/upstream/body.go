package upstream

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Bounds on an answer (model output is untrusted): one line of the event
// stream, and the whole stream.
const (
	MaxEventBytes  = 4 << 20
	MaxStreamBytes = 64 << 20
)

// ErrTooLarge: a line of the stream or the whole stream is over its bound.
var ErrTooLarge = errors.New("server-sent event stream over its size limit")

// boundedBody fails a response body with ErrTooLarge once it passes
// MaxStreamBytes in total or MaxEventBytes without a line break; the SDKs'
// event decoders read through it, so they never buffer more than that.
type boundedBody struct {
	rc          io.ReadCloser
	total, line int
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.total += n
	if b.total > MaxStreamBytes {
		return n, fmt.Errorf("a stream of more than %d bytes: %w", MaxStreamBytes, ErrTooLarge)
	}
	for _, c := range p[:n] {
		if c == '\n' {
			b.line = 0
		} else if b.line++; b.line > MaxEventBytes {
			return n, fmt.Errorf("a line of more than %d bytes: %w", MaxEventBytes, ErrTooLarge)
		}
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// Exchange is the SDK middleware of both provider plugins (the SDKs call
// it around every HTTP exchange): a non-2xx answer becomes the provider
// error of HTTPError, read from a bounded body, so the SDK's own error
// decoding (unbounded, and unaware of spend caps and x-should-retry) never
// runs; a 2xx body is bounded. requestIDHeader names the upstream's
// request id header.
func (u Upstream) Exchange(req *http.Request, next func(*http.Request) (*http.Response, error), requestIDHeader string) (*http.Response, error) {
	resp, err := next(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, u.HTTPError(resp, requestIDHeader)
	}
	resp.Body = &boundedBody{rc: resp.Body}
	return resp, nil
}
