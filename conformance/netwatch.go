package conformance

import (
	"context"
	"sync"

	"github.com/hashicorp/go-plugin"

	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// netHub is the sandbox.Auditor of the suite's L2 containers and of its
// own CONNECT proxy: it hands every proxied request to whoever watches
// (the provider profile counts the tunnels its plugin opened).
type netHub struct {
	mu       sync.Mutex
	next     int
	watchers map[int]func(sandbox.NetworkEvent)
}

// NetworkRequest implements sandbox.Auditor.
func (h *netHub) NetworkRequest(_ context.Context, ev sandbox.NetworkEvent) {
	h.mu.Lock()
	ws := make([]func(sandbox.NetworkEvent), 0, len(h.watchers))
	for _, w := range h.watchers {
		ws = append(ws, w)
	}
	h.mu.Unlock()
	for _, w := range ws {
		w(ev)
	}
}

// WatchNetwork calls f for every proxied request until the returned
// function is called.
func (h *netHub) WatchNetwork(f func(sandbox.NetworkEvent)) (stop func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.watchers == nil {
		h.watchers = map[int]func(sandbox.NetworkEvent){}
	}
	id := h.next
	h.next++
	h.watchers[id] = f
	return func() {
		h.mu.Lock()
		delete(h.watchers, id)
		h.mu.Unlock()
	}
}

// networkWatcher is a launcher whose sandboxes' proxies report to the
// suite (the L2 launcher OpenL2 returns).
type networkWatcher interface {
	WatchNetwork(f func(sandbox.NetworkEvent)) (stop func())
}

// l2Launcher is the container launcher with the suite's network hub.
type l2Launcher struct {
	*sandbox.Containers
	hub    *netHub
	engine rt.Client // the adapter the containers run through
}

// EngineView is the engine's own record of containers, read through the
// builtin runtime-docker adapter of this launcher (see engineView).
func (l l2Launcher) EngineView() rt.Client { return l.engine }

func (l l2Launcher) WatchNetwork(f func(sandbox.NetworkEvent)) func() { return l.hub.WatchNetwork(f) }

// recorder wraps a launcher and keeps what each launch returned, so an
// item can find the container its plugin runs in.
type recorder struct {
	inner interface {
		Prepare(ctx context.Context, spec sandbox.LaunchSpec, cfg *plugin.ClientConfig) (sandbox.Launched, error)
	}
	mu       sync.Mutex
	launched []sandbox.Launched
}

func (r *recorder) Prepare(ctx context.Context, spec sandbox.LaunchSpec, cfg *plugin.ClientConfig) (sandbox.Launched, error) {
	l, err := r.inner.Prepare(ctx, spec, cfg)
	if err == nil {
		r.mu.Lock()
		r.launched = append(r.launched, l)
		r.mu.Unlock()
	}
	return l, err
}

// last returns the most recent launch's status function (nil if none or
// the launcher has no sandbox).
func (r *recorder) last() func() sandbox.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.launched) == 0 {
		return nil
	}
	return r.launched[len(r.launched)-1].Status
}
