package upstream

import (
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// NewHTTPClient returns the client a provider plugin uses. Inside an
// ai-provider sandbox (runtime.EnvProxySocket set) every connection is a
// CONNECT tunnel through the kernel's proxy; without one (--sandbox=none,
// in-process tests) it dials directly. getenv is os.Getenv when nil.
// There is no overall timeout: a turn streams as long as the model writes,
// and the caller's context ends it.
func NewHTTPClient(getenv func(string) string) *http.Client {
	if getenv == nil {
		getenv = os.Getenv
	}
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if getenv(runtime.EnvProxySocket) != "" {
		dial = runtime.DialViaProxy
	}
	tr := &http.Transport{
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	return &http.Client{Transport: tr}
}

// Drain reads what little follows a stream's end marker (at most 4 KiB,
// for at most 200 ms) so the connection — a tunnel through the kernel's
// proxy — is reused by the next turn instead of dialled again. The caller
// still closes body.
func Drain(body io.ReadCloser) {
	t := time.AfterFunc(200*time.Millisecond, func() { body.Close() })
	defer t.Stop()
	_, _ = io.CopyN(io.Discard, body, 4<<10)
}
