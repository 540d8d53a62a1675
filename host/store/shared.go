package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Defaults of a Shared database.
const (
	// DefaultSharedWait bounds how long Acquire waits for another process
	// to let go of the database. Other processes hold it for one
	// operation (milliseconds), so reaching it means one is stuck.
	DefaultSharedWait = 30 * time.Second
	// DefaultSharedLinger is how long the database stays open after its
	// last use, so that a burst of operations (a kernel's start, a plugin
	// install) opens it once.
	DefaultSharedLinger = 200 * time.Millisecond
)

// SharedOptions configure NewShared.
type SharedOptions struct {
	// Options open the database (Dir required).
	Options
	// Wait bounds how long Acquire waits for the lock (default
	// DefaultSharedWait).
	Wait time.Duration
	// Linger keeps the database open this long after its last release
	// (default DefaultSharedLinger; negative: close at once).
	Linger time.Duration
}

// Shared is a database that several processes use in turn, none for its
// whole life: each use opens it (waiting, up to a bound, while another
// process has it), and it is closed again shortly after the last use. The
// goroutines of one process share one open handle. The home database is
// used this way, so that the kernels of any number of projects and the
// plugin CLI can run at once.
//
// View, Update and Sync make Shared usable wherever a badger handle's
// transactions are (host/registry).
type Shared struct {
	o SharedOptions

	mu sync.Mutex
	db *DB
	// lost is the DISK_FULL error of a database this process had to leave
	// unflushed on a full disk: badger keeps its directory locked until
	// the process exits, so it is not opened again.
	lost  error
	refs  int
	gen   uint64 // counts releases, so a stale linger timer does nothing
	timer *time.Timer
}

// NewShared returns the shared database described by o; nothing is opened
// until Acquire.
func NewShared(o SharedOptions) *Shared {
	if o.Wait <= 0 {
		o.Wait = DefaultSharedWait
	}
	if o.Linger == 0 {
		o.Linger = DefaultSharedLinger
	}
	o.OpenOften = true
	return &Shared{o: o}
}

// Dir is the database directory.
func (s *Shared) Dir() string { return s.o.Dir }

// Acquire returns the open database and a release function the caller
// must call once (more calls do nothing) when done with it. The database
// is opened if this process does not have it open, waiting up to the
// Wait bound while another process holds it; then the error is
// STORE_LOCKED and names the holder.
func (s *Shared) Acquire(ctx context.Context) (*DB, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != nil {
		return nil, nil, s.lost
	}
	if s.db == nil {
		db, err := s.openWait(ctx)
		if err != nil {
			return nil, nil, err
		}
		s.db = db
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.refs++
	return s.db, sync.OnceFunc(s.release), nil
}

func (s *Shared) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	s.gen++
	if s.refs > 0 || s.db == nil {
		return
	}
	if s.o.Linger < 0 {
		s.closeLocked()
		return
	}
	gen := s.gen
	s.timer = time.AfterFunc(s.o.Linger, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gen == gen && s.refs == 0 {
			s.closeLocked()
		}
	})
}

func (s *Shared) closeLocked() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.db == nil {
		return
	}
	if err := s.db.Close(); err != nil {
		if uerr.HasCode(err, CodeDiskFull) {
			s.lost = err
		}
		if s.o.Logger != nil {
			s.o.Logger.Warn("closing the shared database failed", "dir", s.o.Dir, "error", err)
		}
	}
	s.db = nil
}

// Open reports whether this process has the database open now.
func (s *Shared) Open() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db != nil
}

// Close closes the database now if nobody in this process uses it (else
// the last release closes it after Linger). A later Acquire opens it again.
func (s *Shared) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == 0 {
		s.closeLocked()
	}
	return nil
}

func (s *Shared) openWait(ctx context.Context) (*DB, error) {
	return OpenWait(ctx, s.o.Options, s.o.Wait)
}

// OpenWait is Open, retrying while another process holds the database, for
// at most wait; then the error is STORE_LOCKED naming the holder. The
// pause between tries grows from 2 ms to 50 ms, with jitter so that
// waiting processes do not retry in step.
func OpenWait(ctx context.Context, o Options, wait time.Duration) (*DB, error) {
	start := time.Now()
	deadline := start.Add(wait)
	pause := 2 * time.Millisecond
	for {
		db, err := Open(ctx, o)
		if err == nil {
			return db, nil
		}
		if !uerr.HasCode(err, CodeLocked) {
			return nil, err
		}
		if time.Now().After(deadline) {
			label := o.Label
			if label == "" {
				label = "project database"
			}
			return nil, lockedErr(o.Dir, label, err, time.Since(start))
		}
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("wait for %s: %w", o.Dir, ctx.Err())
		case <-t.C:
		}
		pause = min(pause*2, 50*time.Millisecond)
	}
}

// View runs fn in a read transaction of the database.
func (s *Shared) View(fn func(*badger.Txn) error) error {
	db, release, err := s.Acquire(context.Background())
	if err != nil {
		return err
	}
	defer release()
	return db.View(fn)
}

// Update runs fn in a read-write transaction of the database.
func (s *Shared) Update(fn func(*badger.Txn) error) error {
	db, release, err := s.Acquire(context.Background())
	if err != nil {
		return err
	}
	defer release()
	return db.Update(fn)
}

// Sync forces the writes so far to stable storage. A database this process
// does not have open has nothing unsynced of its (Close syncs).
func (s *Shared) Sync() error {
	s.mu.Lock()
	db := s.db
	if db != nil {
		s.refs++
	}
	s.mu.Unlock()
	if db == nil {
		return nil
	}
	defer s.release()
	return db.Sync()
}
