package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// startHTTP connects to a streamable HTTP server. Every connection is a
// CONNECT tunnel through the kernel's proxy, which allows only the URL's
// host (and what the policy's network_whitelist lists); b.mu is held.
func (b *bridge) startHTTP(ctx context.Context) (*mcp.ClientSession, error) {
	sock := os.Getenv(envProxySocket)
	if sock == "" {
		return nil, uerr.New("MCP_NO_NETWORK", fmt.Sprintf("MCP server %s is an HTTP server, and this sandbox has no network", b.cfg.Server),
			"the bridge reaches an HTTP server only through the kernel's proxy", "this is a kernel bug: an HTTP server's bridge runs in the ai-provider sandbox")
	}
	client := &http.Client{Transport: &cappedTransport{rt: &http.Transport{
		Proxy:                 nil,
		DialContext:           tunnelDialer(sock),
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: defaultTimeout,
		MaxIdleConns:          4,
	}}}
	t := &mcp.StreamableClientTransport{Endpoint: b.cfg.URL, HTTPClient: client, DisableStandaloneSSE: true, MaxRetries: 1}
	sctx, cancel := context.WithTimeout(ctx, startBudget)
	defer cancel()
	sess, err := mcp.NewClient(&mcp.Implementation{Name: "fluffy", Version: version}, nil).Connect(sctx, t, nil)
	if err != nil {
		return nil, uerr.New("MCP_START_FAILED", fmt.Sprintf("MCP server %s (%s) did not complete the MCP handshake", b.cfg.Server, clip(b.cfg.URL, 200)),
			clip(err.Error(), 512), "check the URL; the host must be reachable from the kernel and allowed by the policy's network_whitelist")
	}
	b.sess = sess
	b.exited = make(chan struct{}) // no child: never closed
	return sess, nil
}

// tunnelDialer opens every TCP connection as a CONNECT tunnel on the
// proxy's unix socket; TLS, when the URL is https, runs inside it.
func tunnelDialer(sock string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(dl)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			c.Close()
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			c.Close()
			return nil, fmt.Errorf("the kernel's proxy refused %s: %s %s", addr, resp.Status, clip(string(body), 512))
		}
		_ = c.SetDeadline(time.Time{})
		if br.Buffered() > 0 {
			c.Close()
			return nil, errors.New("the proxy sent data before the tunnel opened")
		}
		return c, nil
	}
}

// cappedTransport bounds every response body to maxLine bytes: a server
// that streams without end fails that request.
type cappedTransport struct{ rt http.RoundTripper }

func (t *cappedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: maxLine}
	return resp, nil
}

type cappedBody struct {
	rc   io.ReadCloser
	left int64
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, fmt.Errorf("the server's response is larger than %d bytes", maxLine)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.rc.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *cappedBody) Close() error { return c.rc.Close() }
