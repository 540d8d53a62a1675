package fault

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/test/harness"
)

// engineProxy forwards a unix socket to the machine's container engine
// until cut: then it stops accepting and closes every connection it
// forwarded, as an engine that went away does. It never touches the
// engine itself.
type engineProxy struct {
	path, engine string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newEngineProxy(t *testing.T) *engineProxy {
	t.Helper()
	engine := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); len(h) > len("unix://") && h[:len("unix://")] == "unix://" {
		engine = h[len("unix://"):]
	}
	dir, err := os.MkdirTemp("", "fe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &engineProxy{path: filepath.Join(dir, "engine.sock"), engine: engine, conns: map[net.Conn]bool{}}
	p.listen(t)
	t.Cleanup(p.cut)
	return p
}

// listen (again) on the proxy's path: the engine is back.
func (p *engineProxy) listen(t *testing.T) {
	t.Helper()
	_ = os.Remove(p.path)
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *engineProxy) forward(c net.Conn) {
	e, err := net.Dial("unix", p.engine)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil {
		p.mu.Unlock()
		c.Close()
		e.Close()
		return
	}
	p.conns[c], p.conns[e] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(e, c); e.Close() }()
	_, _ = io.Copy(c, e)
	c.Close()
}

// cut stops the proxy and drops every forwarded connection.
func (p *engineProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// TestEngineCutMidTask: the kernel reaches the container engine through a
// socket proxy the test runs; the proxy is cut while a tool call is under
// way (the machine's engine is never touched). The task fails saying the
// engine does not answer and how to check it; once the proxy listens
// again the session resumes, the cut-off kernel's containers are reaped,
// and a task finishes.
func TestEngineCutMidTask(t *testing.T) {
	px := newEngineProxy(t)
	u := newUser(t, harness.Turns([]call{harness.Plan()}, []call{harness.Write("slow_test.go", slowTest), harness.TestRun()}), "DOCKER_HOST=unix://"+px.path)
	tk := u.start("make Count ignore case")
	tk.waitEvent(t, 3*time.Minute, "fs.write executing", executing("fs.write"))
	u.markDead()
	px.cut()
	tk.wait(t, 2*time.Minute)
	code, reason := told(t, tk, "RUNTIME_UNREACHABLE", "SANDBOX_ENGINE_LOST")
	for _, ev := range tk.events(t) {
		if ev.Type == "error" && ev.Error != nil && ev.Error.Code == code && !strings.Contains(ev.Error.Fix, "docker info") {
			t.Fatalf("the %s error does not say how to check the engine: %+v", code, ev.Error)
		}
	}
	if !strings.Contains(reason, "engine") {
		t.Fatalf("the task's reason does not name the engine: %q", reason)
	}
	// The engine is back, at a new socket of the same path as an engine
	// restart makes it. The kernel that lost it cannot remove its
	// containers (its jailed adapter still holds the old socket): they
	// are reaped after it.
	px.listen(t)
	u.recovered(map[string][]string{"wordfreq.go": {wordfreq}, "slow_test.go": {""}})
	u.finishes()
}
