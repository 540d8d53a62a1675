package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/diskfree"
	"github.com/fluffy-waffle/fluffy/lib/units"
)

// CodeQuotaExceeded: a plugin wrote more than its template allows into
// one of its writable host directories (/out, its socket directory); its
// sandbox was stopped and what it wrote there was discarded.
const CodeQuotaExceeded = "SANDBOX_QUOTA_EXCEEDED"

const (
	// sockQuotaBytes bounds the go-plugin socket directory, the other host
	// directory a plugin can write: it needs only its socket there.
	sockQuotaBytes = 1 << 20
	// quotaMaxEntries bounds the files and directories in one watched
	// directory (each costs an inode and a walk step whatever its size).
	quotaMaxEntries = 20000
	// entryBytes is what one entry is charged besides its blocks.
	entryBytes = 512
	// quotaInterval is how often a sandbox's writable directories are
	// measured at most; quotaMaxInterval at least (see watchQuota).
	quotaInterval    = 20 * time.Millisecond
	quotaMaxInterval = time.Second
	// quotaAssumedRate (bytes/s) is the fastest a plugin is expected to
	// write: a directory is measured again before a writer at this rate
	// could have filled its headroom. Writes into the page cache of an
	// idle machine run at several GiB/s.
	quotaAssumedRate = 4 << 30
)

// dirUsage is the disk space the tree under dir takes (blocks actually
// allocated, plus entryBytes per entry) and its number of entries. It never
// follows a symbolic link and stops counting past maxEntries.
func dirUsage(dir string, maxEntries int) (bytes int64, entries int, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if p == dir {
			return nil
		}
		entries++
		bytes += entryBytes
		if fi, ierr := d.Info(); ierr == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				bytes += st.Blocks * 512
			}
		}
		if entries > maxEntries {
			return fs.SkipAll
		}
		return nil
	})
	return bytes, entries, err
}

// quotaDir is one host directory a sandbox can write, and its limit.
type quotaDir struct {
	what  string // how the plugin sees it, e.g. "/out"
	dir   string // host path
	limit int64
}

// sandboxQuotaDirs is what every launcher bounds (the Docker one and
// bwrap alike): the plugin's socket directory (sockQuotaBytes; guestSock
// is how the plugin sees it) and, if it has one, its /out (outLimit).
func sandboxQuotaDirs(guestSock, hostSock, out string, outLimit int64) []quotaDir {
	dirs := []quotaDir{{what: guestSock + " (its socket directory)", dir: hostSock, limit: sockQuotaBytes}}
	if out != "" {
		dirs = append(dirs, quotaDir{what: GuestOut, dir: out, limit: outLimit})
	}
	return dirs
}

// overQuota is why a sandbox was stopped for its disk use.
type overQuota struct {
	what, dir    string
	used, limit  int64
	entries, max int
	// full: the limit is the size of the filesystem the plugin filled
	// (its writes there failed with ENOSPC), not a measured overrun.
	full bool
}

func (q overQuota) String() string {
	if q.entries > q.max {
		return fmt.Sprintf("it created more than %d files in %s", q.max, q.what)
	}
	if q.full {
		return fmt.Sprintf("it filled %s to its limit of %s (its writes there failed: no space left)", q.what, units.FormatSize(q.limit))
	}
	return fmt.Sprintf("it wrote %s to %s, more than its limit of %s", diskfree.MiB(q.used), q.what, units.FormatSize(q.limit))
}

// watchQuota measures each of dirs until ctx ends, and calls stop once
// with the first directory found over its limit. A directory is measured
// again after quotaInterval, or after the time a writer at
// quotaAssumedRate needs to fill its remaining headroom when that is
// longer (at most quotaMaxInterval), and never more often than twice the
// time its last measurement took: a large output far below its limit is
// walked about once a second, not ten times.
func watchQuota(ctx context.Context, dirs []quotaDir, stop func(overQuota)) {
	next := make([]time.Time, len(dirs))
	for {
		now := time.Now()
		due := now.Add(quotaMaxInterval)
		for i, d := range dirs {
			if now.Before(next[i]) {
				due = minTime(due, next[i])
				continue
			}
			start := time.Now()
			used, n, err := dirUsage(d.dir, quotaMaxEntries)
			took := time.Since(start)
			if err == nil && (used > d.limit || n > quotaMaxEntries) {
				stop(overQuota{what: d.what, dir: d.dir, used: used, limit: d.limit, entries: n, max: quotaMaxEntries})
				return
			}
			wait := max(quotaInterval, 2*took, min(time.Duration(float64(d.limit-used)/quotaAssumedRate*float64(time.Second)), quotaMaxInterval))
			next[i] = time.Now().Add(wait)
			due = minTime(due, next[i])
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(due)):
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// emptyDir removes everything below dir and keeps dir.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var first error
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// emptyWhenQuiet empties dir until it stays empty for settle (the killed
// writer may finish a write in flight after its kill was sent), or until
// timeout. It is for launchers that cannot wait for their sandbox's exit
// themselves (bwrap: go-plugin owns the process's Wait).
func emptyWhenQuiet(dir string, settle, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := emptyDir(dir)
		time.Sleep(settle)
		ents, rerr := os.ReadDir(dir)
		if rerr != nil {
			return rerr
		}
		if len(ents) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still written to %s after its sandbox was killed", dir, timeout)
		}
	}
}
