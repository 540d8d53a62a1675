package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// NetworkEvent is one request through the CONNECT proxy.
type NetworkEvent struct {
	Time     time.Time
	Plugin   string
	Instance string
	// Target is the host:port the plugin asked for.
	Target  string
	Allowed bool
	Reason  string
}

// Auditor records proxied network requests. host/audit implements it once
// the audit log exists; the proxy calls it for every request, allowed or not.
type Auditor interface {
	NetworkRequest(ctx context.Context, ev NetworkEvent)
}

// NetworkPolicy is the project policy's say on which hosts plugins reach
// (its network_whitelist). The proxy asks it at every CONNECT, so a
// reloaded policy applies to the next tunnel.
type NetworkPolicy interface {
	// AllowHost reports whether target (host:port, lower case) may be
	// reached; when it may not, why says which policy refused it.
	AllowHost(target string) (ok bool, why string)
}

// ProxyConfig configures one plugin instance's proxy.
type ProxyConfig struct {
	Plugin   string
	Instance string
	// Allow lists host:port targets ("api.openai.com:443") the plugin's
	// manifest declares; a bare host means port 443. Nothing else is
	// reachable.
	Allow []string
	// Policy, when set, must allow a target too: a host is reachable
	// only when Allow lists it AND Policy allows it.
	Policy  NetworkPolicy
	Auditor Auditor
	Logger  hclog.Logger
	// DialTimeout bounds the upstream connect (default 10 s).
	DialTimeout time.Duration
}

const proxySocketName = "proxy.sock"

// Proxy is a CONNECT-only forward proxy on a unix socket, one per plugin
// instance, so every request is attributed to the plugin that made it. It
// never terminates TLS: it sees the target host and port, not the content.
type Proxy struct {
	cfg   ProxyConfig
	dir   string
	ln    net.Listener
	allow []string
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	once  sync.Once
}

func normalizeTarget(t string) string {
	t = strings.ToLower(strings.TrimSpace(t))
	if _, _, err := net.SplitHostPort(t); err != nil {
		return net.JoinHostPort(t, "443")
	}
	return t
}

// StartProxy listens on dir/proxy.sock (dir is created and bind-mounted into
// the sandbox read-only).
func StartProxy(dir string, cfg ProxyConfig) (*Proxy, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("proxy dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("proxy dir: %w", err)
	}
	sock := filepath.Join(dir, proxySocketName)
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	// The sandbox user must be able to connect.
	if err := os.Chmod(sock, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("proxy socket: %w", err)
	}
	p := &Proxy{cfg: cfg, dir: dir, ln: ln, conns: map[net.Conn]struct{}{}}
	for _, a := range cfg.Allow {
		p.allow = append(p.allow, normalizeTarget(a))
	}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Dir is the host directory holding the proxy socket.
func (p *Proxy) Dir() string { return p.dir }

// Socket is the host path of the proxy socket.
func (p *Proxy) Socket() string { return filepath.Join(p.dir, proxySocketName) }

// Close stops the proxy, cuts open tunnels and removes the socket directory.
func (p *Proxy) Close() error {
	var err error
	p.once.Do(func() {
		err = p.ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
		if rerr := os.RemoveAll(p.dir); rerr != nil && err == nil {
			err = rerr
		}
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c, true)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.track(c, false)
			defer c.Close()
			p.handle(c)
		}()
	}
}

func (p *Proxy) audit(target string, allowed bool, reason string) {
	ev := NetworkEvent{Time: time.Now(), Plugin: p.cfg.Plugin, Instance: p.cfg.Instance, Target: target, Allowed: allowed, Reason: reason}
	p.cfg.Logger.Info("proxy request", "plugin", ev.Plugin, "target", target, "allowed", allowed, "reason", reason)
	if p.cfg.Auditor != nil {
		p.cfg.Auditor.NetworkRequest(context.Background(), ev)
	}
}

func reply(c net.Conn, code int, msg string) {
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(msg), msg)
}

// refusal says why target may not be reached ("" when it may) and how to
// allow it: the plugin's manifest must declare the host and the policy
// (if it has a say) must allow it; each refusal names which one refused.
func (p *Proxy) refusal(target string) (reason, fix string) {
	if !slices.Contains(p.allow, target) {
		return "host not in the network allowlist of plugin " + p.cfg.Plugin + " (its manifest's `network` list)",
			"only a plugin whose plugin.yaml declares the host under `network` may reach it"
	}
	if p.cfg.Policy != nil {
		if ok, why := p.cfg.Policy.AllowHost(target); !ok {
			return why, "add the host to network_whitelist in the project policy (.fluffy/policy.yaml) if " + p.cfg.Plugin + " may reach it"
		}
	}
	return "", ""
}

func (p *Proxy) handle(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(io.LimitReader(c, 64<<10))
	req, err := http.ReadRequest(br)
	if err != nil {
		reply(c, http.StatusBadRequest, "fluffy proxy: malformed request\n")
		return
	}
	if req.Method != http.MethodConnect {
		p.audit(req.Host, false, "method "+req.Method+" refused: CONNECT only")
		reply(c, http.StatusMethodNotAllowed, "fluffy proxy: only CONNECT tunnels are allowed (use HTTPS)\n")
		return
	}
	target := normalizeTarget(req.Host)
	if reason, fix := p.refusal(target); reason != "" {
		p.audit(target, false, reason)
		reply(c, http.StatusForbidden, fmt.Sprintf("fluffy proxy: %s refused: %s; %s\n", target, reason, fix))
		return
	}
	up, err := net.DialTimeout("tcp", target, p.cfg.DialTimeout)
	if err != nil {
		p.audit(target, true, "upstream unreachable: "+err.Error())
		reply(c, http.StatusBadGateway, "fluffy proxy: "+target+" unreachable\n")
		return
	}
	p.audit(target, true, "allowed")
	p.track(up, true)
	defer p.track(up, false)
	defer up.Close()
	_ = c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		if br.Buffered() > 0 {
			b, _ := br.Peek(br.Buffered())
			_, _ = up.Write(b)
		}
		_, _ = io.Copy(up, c)
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(c, up)
		if uc, ok := c.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}
