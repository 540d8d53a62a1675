package main

import (
	"io"
	"net"
	"os"
	"sync"
)

// envProxySocket names the kernel's CONNECT proxy socket in a sandbox
// that has one (the integration-test template); the same name as
// plugins/runtime.EnvProxySocket, which a plugin may not import.
const envProxySocket = "FLUFFY_PROXY_SOCKET"

// proxyForwarder gives the server an HTTP proxy address it understands
// (HTTPS_PROXY=http://127.0.0.1:PORT): every connection to it is carried
// byte for byte to the kernel's CONNECT proxy, which alone decides which
// host a tunnel may reach. It adds no reach: the server could open the
// socket itself.
type proxyForwarder struct {
	ln     net.Listener
	socket string
	wg     sync.WaitGroup
}

// startForwarder listens on loopback when the sandbox has a proxy
// socket; nil, nil when it has none (no network at all).
func startForwarder() (*proxyForwarder, error) {
	sock := os.Getenv(envProxySocket)
	if sock == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &proxyForwarder{ln: ln, socket: sock}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// env is what the server gets to find the proxy.
func (f *proxyForwarder) env() map[string]string {
	u := "http://" + f.ln.Addr().String()
	return map[string]string{"HTTPS_PROXY": u, "https_proxy": u, "HTTP_PROXY": u, "http_proxy": u, "ALL_PROXY": u}
}

func (f *proxyForwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.carry(c)
	}
}

func (f *proxyForwarder) carry(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("unix", f.socket)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func (f *proxyForwarder) close() {
	if f != nil {
		f.ln.Close()
		f.wg.Wait()
	}
}
