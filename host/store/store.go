package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Key prefixes, one per owning package. A package reads and writes only keys
// under its own prefix.
const (
	PrefixAudit    = "a/" // host/audit: records, segment index, retention horizon
	PrefixSession  = "s/" // host/state: sessions
	PrefixState    = "m/" // host/state: workflow machine
	PrefixRegistry = "r/" // host/registry: installed plugins
	PrefixChanges  = "w/" // host/workspace: session changesets
	PrefixMerge    = "g/" // host/merge: merge operations (the merge log)
)

// Stable error codes.
const (
	CodeCorrupt = "STORE_CORRUPT" // the database files are damaged
	CodeLocked  = "STORE_LOCKED"  // another process holds the database
	CodeOpen    = "STORE_OPEN"    // the database could not be opened for another reason
	// Causes in the operating system, never taken for damage.
	CodePermission = "STORE_PERMISSION"   // EACCES/EPERM on a database file or directory
	CodeIO         = "STORE_IO"           // EIO: the disk failed a read or write
	CodeNoSpace    = "STORE_NO_SPACE"     // ENOSPC/EDQUOT
	CodeReadOnlyFS = "STORE_READ_ONLY_FS" // EROFS: the file system is mounted read-only
)

// DefaultDir is the database directory inside a project.
func DefaultDir(project string) string { return filepath.Join(project, ".fluffy", "db") }

// Options configure Open.
type Options struct {
	// Dir is the badger directory; required. Usually DefaultDir(project).
	Dir string
	// Logger receives badger's own log lines (at debug) and recovery reports
	// (at warn/error). Nil means hclog.NewNullLogger().
	Logger hclog.Logger
	// Now is the clock used to name quarantined directories; nil means time.Now.
	Now func() time.Time
	// MemTableSize overrides badger's memtable size (default 64 MiB). Tests
	// use a small one to force SST files.
	MemTableSize int64
	// ReadOnly opens the database without writing to it. A damaged database
	// is then reported, never recovered.
	ReadOnly bool
	// NoRecover reports a damaged database as a STORE_CORRUPT error instead
	// of quarantining and salvaging it.
	NoRecover bool
	// Holder names this process in the holder record written beside the
	// data while it holds the database (PID, Host and Since are filled
	// in); another process's STORE_LOCKED error names it.
	Holder Holder
	// Label names the database in errors ("project database" when empty).
	Label string
	// BadgerDefaults runs badger with its own default sizes (64 MiB
	// memtables, a 256 MiB block cache, …) instead of the CLI sizes of
	// badgerOptions: the baseline of the idle-memory benchmark.
	BadgerDefaults bool
	// OpenOften tunes badger for a database opened and closed for every
	// operation (Shared): level 0 is compacted at close, so tables do not
	// pile up between opens that are too short for background compaction.
	OpenOften bool
}

// Recovery describes what Open did to a damaged database.
type Recovery struct {
	// Cause is the STORE_CORRUPT error that triggered recovery.
	Cause error
	// Quarantine is where the damaged files were moved (kept for forensics).
	Quarantine string
	// BadFiles are the files found damaged.
	BadFiles []string
	// SalvagedKeys is how many keys were copied into the fresh database.
	SalvagedKeys int
	// WALsKept is how many write-ahead logs (.mem) were carried over intact.
	WALsKept int
	// At is when recovery happened.
	At time.Time
}

// DB is an open project database. Its writes go through Update and
// WriteBatch, which refuse them with DISK_FULL once the file system has
// less than Reserve free (see guard); reads go through View.
type DB struct {
	bdb       *badger.DB
	dir       string
	log       hclog.Logger
	recovery  *Recovery
	holder    bool     // this process wrote the holder record
	lock      *os.File // the lock file beside the directory (lockDir)
	guard     *guard   // nil when read-only
	abandoned bool     // Close left badger open on a full disk
}

// View runs fn in a read transaction. Reads go on after the disk filled.
func (db *DB) View(fn func(*badger.Txn) error) error { return db.bdb.View(fn) }

// Update runs fn in a read-write transaction, unless the disk is nearly
// full: then nothing runs and the error is DISK_FULL.
func (db *DB) Update(fn func(*badger.Txn) error) error {
	if err := db.admit(); err != nil {
		return err
	}
	return db.bdb.Update(fn)
}

// WriteBatch runs fn with a write batch and flushes it, unless the disk is
// nearly full: then nothing runs and the error is DISK_FULL. A batch
// larger than one transaction commits in parts, so a failure of Flush may
// leave some of it written.
func (db *DB) WriteBatch(fn func(*badger.WriteBatch) error) error {
	if err := db.admit(); err != nil {
		return err
	}
	wb := db.bdb.NewWriteBatch()
	defer wb.Cancel()
	if err := fn(wb); err != nil {
		return err
	}
	return wb.Flush()
}

func (db *DB) admit() error {
	if db.guard == nil {
		return nil // read-only: badger refuses the write itself
	}
	return db.guard.admit()
}

// Full is closed once the database refused a write because the disk is
// nearly full; from then on it refuses every write, and the process must
// reopen it (after space is freed) to write again. A read-only database's
// never closes.
func (db *DB) Full() <-chan struct{} {
	if db == nil || db.guard == nil {
		return nil
	}
	return db.guard.full
}

// FullErr is the DISK_FULL error the database refused its first write
// with, nil while it writes.
func (db *DB) FullErr() error {
	if db == nil || db.guard == nil {
		return nil
	}
	return db.guard.err()
}

// Dir is the database directory.
func (db *DB) Dir() string { return db.dir }

// Recovery is non-nil when Open found the database damaged and recovered it.
func (db *DB) Recovery() *Recovery { return db.recovery }

// Sync forces every write so far to stable storage (the memtable WAL and the
// value log). It writes no page that was not written before, so it runs on
// a full disk too.
func (db *DB) Sync() error {
	if err := db.bdb.Sync(); err != nil {
		return fmt.Errorf("sync database %s: %w", db.dir, err)
	}
	return nil
}

// Close flushes and closes the database. The holder record goes first,
// while the lock is still held, so it never names a process that let go.
//
// Closing flushes the memtable into a new table (and compacts level 0 for
// OpenOften), written through a map: on a file system without the reserve
// free that is a SIGBUS. Then Close only syncs the write-ahead log (the
// next open replays it) and leaves badger open; its directory lock stays
// held until this process exits, so neither this process nor another
// opens the database meanwhile, and the error is DISK_FULL.
func (db *DB) Close() error {
	if db.abandoned {
		return db.guard.err()
	}
	if db.holder {
		removeHolder(db.dir)
		db.holder = false
	}
	if db.guard != nil && !db.guard.room() {
		_ = db.guard.admit()
		_ = db.bdb.Sync()
		db.abandoned = true
		unlockDir(db.lock)
		db.lock = nil
		db.log.Error("the disk is nearly full: the database is left unflushed until this process exits", "dir", db.dir, "error", db.guard.err())
		return db.guard.err()
	}
	err := db.bdb.Close()
	unlockDir(db.lock)
	db.lock = nil
	if err != nil {
		return fmt.Errorf("close database %s: %w", db.dir, err)
	}
	return nil
}

// CLI sizes of badger's tables and caches. Badger's defaults are for a
// server holding gigabytes: five 64 MiB memtables, a 256 MiB block cache,
// 1 GiB value logs, four compactors. A fluffy database holds megabytes
// (audit records, sessions, the registry) and a kernel idles most of its
// life, so these are sized for that; see docs/decisions/badger-sizing.md.
const (
	cliMemTableSize   = 8 << 20  // transactions up to 15% of this (1.2 MiB)
	cliNumMemtables   = 2        // the active one and one being flushed
	cliBlockCacheSize = 4 << 20  // compressed tables need some block cache
	cliIndexCacheSize = 2 << 20  // table indexes and bloom filters
	cliValueLogSize   = 64 << 20 // values over 1 MiB only; smaller mmap
	cliNumCompactors  = 2        // badger's minimum
)

// badgerOptions are the options fluffy runs badger with. SyncWrites stays
// false: callers that need durability call Sync (host/audit does so for
// security events, grouping concurrent ones into one fsync).
func badgerOptions(o Options) badger.Options {
	bo := badger.DefaultOptions(o.Dir).
		WithLogger(badgerLogger{o.Logger.Named("badger")}).
		WithSyncWrites(false).
		WithCompression(options.Snappy).
		WithChecksumVerificationMode(options.NoVerification).
		WithNumVersionsToKeep(1).
		WithReadOnly(o.ReadOnly).
		WithMetricsEnabled(false)
	if !o.BadgerDefaults {
		bo = bo.WithMemTableSize(cliMemTableSize).
			WithNumMemtables(cliNumMemtables).
			WithBlockCacheSize(cliBlockCacheSize).
			WithIndexCacheSize(cliIndexCacheSize).
			WithValueLogFileSize(cliValueLogSize).
			WithNumCompactors(cliNumCompactors)
	}
	if o.OpenOften {
		bo = bo.WithCompactL0OnClose(true)
	}
	if o.MemTableSize > 0 {
		bo = bo.WithMemTableSize(o.MemTableSize).WithBaseTableSize(o.MemTableSize / 2).WithValueLogFileSize(o.MemTableSize * 4)
	}
	return bo
}

// Open opens (creating if needed) the database in o.Dir. Before badger sees
// the files, every table named by the MANIFEST is checked (badger panics in a
// background goroutine on some damaged tables, which no caller could
// recover). A damaged database is moved aside and salvaged into a fresh one
// unless o.NoRecover or o.ReadOnly is set; DB.Recovery then says what happened.
func Open(ctx context.Context, o Options) (*DB, error) {
	if o.Dir == "" {
		return nil, uerr.New(CodeOpen, "no database directory given", "store.Options.Dir is empty", "pass the project's .fluffy/db directory")
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if !o.ReadOnly {
		if err := os.MkdirAll(o.Dir, 0o700); err != nil {
			return nil, classifyOpenError(o.Dir, o.Label, err)
		}
	}
	lk, err := lockDir(o.Dir, o.ReadOnly)
	if err != nil {
		return nil, classifyOpenError(o.Dir, o.Label, err)
	}
	db, err := open(ctx, o)
	if err != nil {
		unlockDir(lk)
		return nil, err
	}
	db.lock = lk
	return db, nil
}

// open is Open once the lock file is held.
func open(ctx context.Context, o Options) (*DB, error) {
	bo := badgerOptions(o)
	if !o.ReadOnly {
		if err := ensureRoom(o.Dir, o.Label, Reserve(bo)); err != nil {
			return nil, err
		}
	}
	cerr, aerr := check(o.Dir, bo)
	if aerr != nil {
		return nil, classifyOpenError(o.Dir, o.Label, aerr)
	}
	if cerr == nil {
		bdb, err := openBadger(bo)
		if err == nil {
			return opened(&DB{bdb: bdb, dir: o.Dir, log: o.Logger}, o), nil
		}
		if !isCorruption(err) {
			return nil, classifyOpenError(o.Dir, o.Label, err)
		}
		cerr = &corruption{files: nil, err: err}
	}
	ue := corruptErr(o.Dir, cerr)
	if o.NoRecover || o.ReadOnly {
		return nil, ue
	}
	o.Logger.Error("database is damaged; recovering", "dir", o.Dir, "error", ue.Error())
	db, err := recoverDB(ctx, o, bo, ue, cerr)
	if err != nil {
		return nil, err
	}
	return opened(db, o), nil
}

// opened records this process as the holder of a writable database.
func opened(db *DB, o Options) *DB {
	if !o.ReadOnly {
		db.guard = newGuard(o.Dir, o.Label, Reserve(badgerOptions(o)))
		writeHolder(db.dir, o.Holder, o.Now)
		db.holder = true
	}
	return db
}

// openBadger calls badger.Open, turning a panic in the calling goroutine into
// an error.
func openBadger(bo badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("badger panicked while opening: %v", r)
		}
	}()
	return badger.Open(bo)
}

// isCorruption reports whether a badger.Open error is positive evidence
// of damage: a checksum or format error, or a panic while reading. An
// operating-system error (permissions, I/O, disk full, read-only file
// system) or a lock never is, and neither is an error not known to mean
// damage: moving a database aside is for files proven bad.
func isCorruption(err error) bool {
	var en syscall.Errno
	if err == nil || isLockErr(err) || errnoOf(err) != 0 || errors.As(err, &en) {
		return false
	}
	if errors.Is(err, y.ErrChecksumMismatch) || errors.Is(err, badger.ErrTruncateNeeded) {
		return true
	}
	s := strings.ToLower(err.Error())
	for _, m := range damageMarks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// damageMarks are the parts of badger's error texts that mean its files
// are malformed (badger does not export most of these errors).
var damageMarks = []string{
	"checksum", "bad magic", "unsupported version", "corrupt", "panicked",
	"truncate", "unexpected eof", "failed to decode",
}

// osCause maps an errno to the error code and advice for it.
type osCause struct {
	code, why, fix string
}

var osCauses = map[syscall.Errno]osCause{
	syscall.EACCES: {CodePermission, "permission denied", "run fluffy as the user who owns the directory, or fix its permissions (ls -l); nothing was moved or changed"},
	syscall.EPERM:  {CodePermission, "operation not permitted", "run fluffy as the user who owns the directory, or fix its permissions (ls -l); nothing was moved or changed"},
	syscall.EIO:    {CodeIO, "the disk reported an I/O error", "check the disk (dmesg, smartctl) and copy .fluffy/db to healthy storage; fluffy does not move files it cannot read"},
	syscall.ENOSPC: {CodeNoSpace, "no space left on the device", "free disk space (df -h) and retry"},
	syscall.EDQUOT: {CodeNoSpace, "the disk quota is exceeded", "free space within your quota (quota -s) and retry"},
	syscall.EROFS:  {CodeReadOnlyFS, "the file system is mounted read-only", "remount it read-write, or use a read-only command (fluffy audit log|verify|export|stats)"},
}

// errnoOf finds the operating-system cause of err: a wrapped errno, or,
// for errors badger flattened into text, the errno's message.
func errnoOf(err error) syscall.Errno {
	var en syscall.Errno
	if errors.As(err, &en) {
		if _, ok := osCauses[en]; ok {
			return en
		}
		return 0
	}
	s := err.Error()
	for en := range osCauses {
		if strings.Contains(s, en.Error()) {
			return en
		}
	}
	return 0
}

func isLockErr(err error) bool {
	s := err.Error()
	return errors.Is(err, errBusy) || strings.Contains(s, "Cannot acquire directory lock") || errors.Is(err, syscall.EWOULDBLOCK)
}

// classifyOpenError turns an error that is not damage into a structured
// error naming its cause.
func classifyOpenError(dir, label string, err error) error {
	if label == "" {
		label = "project database"
	}
	if isLockErr(err) {
		return lockedErr(dir, label, err, 0)
	}
	if en := errnoOf(err); en != 0 {
		c := osCauses[en]
		return uerr.Wrap(err, c.code, "cannot open the "+label+" "+dir+": "+c.why, err.Error(), c.fix).
			WithContext("errno=%s", en.Error())
	}
	return uerr.Wrap(err, CodeOpen, "cannot open the "+label+" "+dir, err.Error(),
		"check free disk space and the permissions of the .fluffy directory")
}

func corruptErr(dir string, c *corruption) *uerr.Error {
	what := "the project database is damaged: " + dir
	why := c.err.Error()
	if len(c.files) > 0 {
		why = fmt.Sprintf("%s (damaged files: %s)", why, strings.Join(c.files, ", "))
	}
	return uerr.Wrap(c.err, CodeCorrupt, what, why,
		"fluffy moves damaged files aside and salvages what it can on the next start; restore .fluffy/db from a backup if you need the lost history")
}

// badgerLogger sends badger's log lines to hclog.
type badgerLogger struct{ l hclog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debug(strings.TrimSpace(fmt.Sprintf(f, a...))) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.l.Trace(strings.TrimSpace(fmt.Sprintf(f, a...))) }
