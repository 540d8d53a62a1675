package store

import (
	"fmt"
	"sync"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/lib/diskfree"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// CodeDiskFull: the database refused a write (or its open) because the
// disk is nearly full. The same code as the start-time check's.
const CodeDiskFull = diskfree.CodeDiskFull

// Sizes badger maps beside the options: each memtable's write-ahead log is
// mapped at twice the memtable, each value log at twice its file size, the
// discard statistics at 1 MiB (badger v4.9.6: memtable.go openMemTable,
// value.go createVlogFile, discard.go InitDiscardStats).
const (
	walPerMemtable = 2
	discardFile    = 1 << 20
)

// Reserve is the free space a writable database with options bo keeps: the
// most badger may still write into pages of sparse memory-mapped files
// because of writes it has already accepted, plus one more. A page the
// file system cannot back is a SIGBUS that kills the process, never an
// error, so the guard refuses a write while less than this is free:
//
//   - the active write-ahead log to its end and the next one it rotates to
//     (2 × walPerMemtable × MemTableSize),
//   - the level-0 table a full memtable is flushed into (MemTableSize),
//   - the compaction that flush may start: every level-0 table that
//     triggers it and the base level it merges into
//     (NumLevelZeroTables × MemTableSize + BaseLevelSize),
//   - a value log up to the size at which it rotates (ValueLogFileSize),
//   - the discard statistics file.
func Reserve(bo badger.Options) int64 {
	m := bo.MemTableSize
	wal := 2 * walPerMemtable * m
	flush := m
	compaction := int64(bo.NumLevelZeroTables)*m + bo.BaseLevelSize
	return wal + flush + compaction + bo.ValueLogFileSize + discardFile
}

// guard refuses writes to a database once its file system has less than
// reserve free. The first refusal trips it for good: from then on every
// write is refused without looking (what was accepted before is in the
// write-ahead log; what a caller holds in memory may disagree with it, so
// the process must reopen the database to go on), and Close leaves badger
// unflushed rather than map a new table onto a full disk.
type guard struct {
	dir     string
	label   string
	reserve int64

	mu      sync.Mutex
	tripped *uerr.Error
	full    chan struct{}
}

func newGuard(dir, label string, reserve int64) *guard {
	return &guard{dir: dir, label: label, reserve: reserve, full: make(chan struct{})}
}

// admit returns nil when a write of the database may go ahead, and the
// DISK_FULL error that tripped the guard otherwise. A file system whose
// free space cannot be read is not taken for full.
func (g *guard) admit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tripped != nil {
		return g.tripped
	}
	free, err := diskfree.Free(g.dir)
	if err != nil || free >= g.reserve {
		return nil
	}
	g.tripped = diskFullErr(g.dir, g.label, free, g.reserve, "stopped writing")
	close(g.full)
	return g.tripped
}

// room reports whether the file system has the reserve free now, without
// tripping the guard.
func (g *guard) room() bool {
	free, err := diskfree.Free(g.dir)
	return err != nil || free >= g.reserve
}

func (g *guard) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tripped == nil {
		return nil
	}
	return g.tripped
}

func diskFullErr(dir, label string, free, reserve int64, did string) *uerr.Error {
	if label == "" {
		label = "project database"
	}
	return uerr.New(CodeDiskFull,
		fmt.Sprintf("the disk is nearly full: the %s %s", label, did),
		fmt.Sprintf("the file system of %s has %s free and the database keeps %s free: it writes through memory-mapped files, where a full disk crashes fluffy instead of failing a write; what was written before is kept", dir, diskfree.MiB(free), diskfree.MiB(reserve)),
		fmt.Sprintf("free space until that file system has at least %s free (df -h %s), then run the command again; `fluffy session resume` goes on with the interrupted session", diskfree.MiB(max(reserve, diskfree.Reserve)), dir)).
		WithContext("free=%d reserve=%d", free, reserve)
}

// ensureRoom is the guard's check at open: badger writes its new
// write-ahead log and value log through maps as it opens.
func ensureRoom(dir, label string, reserve int64) error {
	free, err := diskfree.Free(dir)
	if err != nil || free >= reserve {
		return nil
	}
	return diskFullErr(dir, label, free, reserve, "cannot be opened for writing")
}
