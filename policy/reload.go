package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Watcher reloads a policy file into an Engine when it changes (hot
// reload, seed 003). It polls size and modification time, and compares a
// content hash before reloading; a file that fails to load leaves the old
// policy in force.
type Watcher struct {
	engine   *Engine
	path     string
	interval time.Duration
	log      hclog.Logger
	// OnReload, when set, is called after each attempt (err nil = loaded),
	// e.g. to record a policy_update audit event.
	OnReload func(p *Policy, err error)

	size  int64
	mtime time.Time
	hash  string
}

// NewWatcher watches path for engine, polling every interval (default 1 s).
func NewWatcher(engine *Engine, path string, interval time.Duration, log hclog.Logger) *Watcher {
	if interval <= 0 {
		interval = time.Second
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	w := &Watcher{engine: engine, path: path, interval: interval, log: log}
	if fi, err := os.Stat(path); err == nil {
		w.size, w.mtime = fi.Size(), fi.ModTime()
	}
	w.hash = engine.Policy().Hash
	return w
}

// Run polls until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Check()
		}
	}
}

// Check looks at the file once and reloads it if its content changed. It
// reports whether a new policy was installed.
func (w *Watcher) Check() bool {
	fi, err := os.Stat(w.path)
	if err != nil {
		return false // a missing file keeps the policy in force
	}
	if fi.Size() == w.size && fi.ModTime().Equal(w.mtime) {
		return false
	}
	w.size, w.mtime = fi.Size(), fi.ModTime()
	data, err := os.ReadFile(w.path)
	if err != nil {
		w.log.Error("policy reload: cannot read file; keeping the current policy", "path", w.path, "error", err)
		return false
	}
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	if h == w.hash || h == w.engine.Policy().Hash {
		// Unchanged, or already in force (written and swapped in by the
		// kernel itself, e.g. an approved review's "always").
		w.hash = h
		return false
	}
	w.hash = h
	p, err := Load(w.path, data)
	if w.OnReload != nil {
		w.OnReload(p, err)
	}
	if err != nil {
		w.log.Error("policy reload failed; keeping the current policy", "path", w.path, "error", err)
		return false
	}
	w.engine.Swap(p)
	return true
}
