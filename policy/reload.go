package policy

import (
	"context"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Watcher reloads a policy file into an Engine when it changes (hot
// reload). It polls the size and modification time of the file
// (and of any Also paths, e.g. the approval record that decides whether
// the file may apply), loads through Source when one changed, and swaps
// the result in when it differs from the policy in force. A policy that
// fails to load leaves the old one in force; so does a missing file.
type Watcher struct {
	engine   *Engine
	path     string
	interval time.Duration
	log      hclog.Logger
	// OnReload, when set, is called before each swap (err nil = loaded)
	// and for each load that failed, e.g. to record a policy_update audit
	// event. The engine still holds the old policy when it runs.
	OnReload func(p *Policy, err error)
	// Source, when set, gives the policy the file's current state puts in
	// force (e.g. the embedded default while the file is not approved).
	// Nil loads the file itself.
	Source func() (*Policy, error)
	// Also are more files whose change calls for a new look (the approval
	// record of the file).
	Also []string

	stamps []stamp
	last   string // key of the last outcome: hashes, or the error
}

type stamp struct {
	ok    bool
	size  int64
	mtime time.Time
}

// NewWatcher watches path for engine, polling every interval (default 1 s).
// Set Source and Also before the first Check.
func NewWatcher(engine *Engine, path string, interval time.Duration, log hclog.Logger) *Watcher {
	if interval <= 0 {
		interval = time.Second
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Watcher{engine: engine, path: path, interval: interval, log: log}
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

func (w *Watcher) stampAll() []stamp {
	paths := append([]string{w.path}, w.Also...)
	out := make([]stamp, len(paths))
	for i, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			out[i] = stamp{ok: true, size: fi.Size(), mtime: fi.ModTime()}
		}
	}
	return out
}

// key identifies what a policy puts in force: its content, and the
// unapproved file it stands in for.
func key(p *Policy) string {
	k := p.Hash
	if p.Unapproved != nil {
		k += "|unapproved:" + p.Unapproved.Hash
	}
	return k
}

// Check looks at the files once and reloads the policy if they changed. It
// reports whether a new policy was installed.
func (w *Watcher) Check() bool {
	now := w.stampAll()
	if w.stamps == nil {
		// The first look loads once: the files may have changed since
		// the policy in force was loaded from them.
		w.stamps = make([]stamp, len(now))
		w.last = key(w.engine.Policy())
	}
	changed := false
	for i := range now {
		if now[i] != w.stamps[i] {
			changed = true
		}
	}
	w.stamps = now
	if !changed || !now[0].ok {
		return false // unchanged, or a missing file: the policy in force stays
	}
	load := w.Source
	if load == nil {
		load = func() (*Policy, error) { return LoadFile(w.path) }
	}
	p, err := load()
	if err != nil {
		if k := "error:" + err.Error(); k != w.last {
			w.last = k
			if w.OnReload != nil {
				w.OnReload(nil, err)
			}
			w.log.Error("policy reload failed; keeping the current policy", "path", w.path, "error", err)
		}
		return false
	}
	k := key(p)
	if k == w.last || k == key(w.engine.Policy()) {
		// Unchanged, or already in force (written and swapped in by the
		// kernel itself, e.g. an approved review's "always").
		w.last = k
		return false
	}
	w.last = k
	if w.OnReload != nil {
		w.OnReload(p, nil)
	}
	w.engine.Swap(p)
	return true
}
