package audit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/redact"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Clock supplies timestamps; tests substitute a fixed one.
type Clock interface{ Now() time.Time }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Options configure Open.
type Options struct {
	// DB is the project database shared with other packages. If nil, Open
	// opens store.Options{Dir: Dir} itself and Close closes it.
	DB *store.DB
	// Dir is the badger directory, used only when DB is nil.
	Dir    string
	Logger hclog.Logger
	Clock  Clock
	// StartTime is the kernel start time that seeds a new segment's genesis
	// hash. Default: Clock.Now() at Open.
	StartTime time.Time
	// FlushInterval bounds how long an operational event stays buffered
	// (default 500 ms); FlushEntries flushes earlier once that many are
	// pending (default 100).
	FlushInterval time.Duration
	FlushEntries  int
	// MaxPending makes operational appends wait for the writer once this
	// many records are pending (default 65536), bounding memory.
	MaxPending int
	// TailVerify is how many of the newest records Open verifies (default
	// 10000; verification also never reaches back past the newest segment).
	TailVerify int
	// Retention is applied by ApplyRetention.
	Retention Retention
	// ReadOnly opens the log for reading only (audit log, verify, export,
	// stats): the database is opened read-only when Open opens it, a break
	// found at Open is reported (StartupReport) but not recorded, and
	// Append and ApplyRetention fail with AUDIT_READ_ONLY.
	ReadOnly bool
}

// Log is the audit log. All methods are safe for concurrent use.
type Log struct {
	db     *store.DB
	owned  bool
	o      Options
	log    hclog.Logger
	red    *redact.Redactor
	startM int64

	mu         sync.Mutex
	nextID     uint64
	prevHash   Hash
	newSegment bool // the next record begins a chain segment
	cur        *batch
	inflight   *batch // the batch the writer is writing, if any
	closed     bool
	failed     error
	startup    Report

	kick    chan struct{}
	closing chan struct{}
	done    chan struct{}
}

type batch struct {
	keys, vals [][]byte
	records    int
	first      time.Time // when the first record was added (wall clock)
	sync       bool
	lastID     uint64
	lastHash   Hash
	done       chan struct{}
	err        error
}

func newBatch() *batch { return &batch{done: make(chan struct{})} }

// Open opens the log, verifies the tail of the chain, and starts the writer.
// A broken chain or a recovered database never fails Open: it is recorded as
// an audit_chain_break event that begins a new chain segment, and
// StartupReport says what was found.
func Open(ctx context.Context, o Options) (*Log, error) {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.StartTime.IsZero() {
		o.StartTime = o.Clock.Now()
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 500 * time.Millisecond
	}
	if o.FlushEntries <= 0 {
		o.FlushEntries = 100
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 8192
	}
	if o.TailVerify <= 0 {
		o.TailVerify = 10000
	}
	if err := o.Retention.validate(); err != nil {
		return nil, err
	}
	l := &Log{
		db: o.DB, o: o, log: o.Logger.Named("audit"), red: redact.New(),
		startM: o.StartTime.UnixMilli(), cur: newBatch(),
		kick: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{}),
	}
	if l.db == nil {
		if o.Dir == "" {
			return nil, uerr.New(store.CodeOpen, "no audit database given", "audit.Options has neither DB nor Dir", "pass the project database or its directory")
		}
		db, err := store.Open(ctx, store.Options{Dir: o.Dir, Logger: o.Logger, Now: o.Clock.Now, ReadOnly: o.ReadOnly})
		if err != nil {
			return nil, err
		}
		l.db, l.owned = db, true
	}
	if err := l.loadHead(); err != nil {
		l.closeStore()
		return nil, err
	}
	rep, err := l.verifyTail(ctx)
	if err != nil {
		l.closeStore()
		return nil, err
	}
	l.startup = rep
	go l.run()

	rec := l.db.Recovery()
	if o.ReadOnly {
		return l, nil
	}
	if !rep.OK() || rec != nil {
		md := map[string]string{}
		reason := ""
		if !rep.OK() {
			md[MetaFirstBad] = strconv.FormatUint(rep.FirstBad(), 10)
			md["breaks"] = strconv.Itoa(rep.TotalBreaks)
			reason = rep.Breaks[0].Reason
			l.log.Error("audit chain broken; starting a new segment", "first_bad_id", rep.FirstBad(), "reason", reason)
		}
		if rec != nil {
			md[MetaStoreQuarantine] = rec.Quarantine
			md[MetaStoreSalvaged] = strconv.Itoa(rec.SalvagedKeys)
			if len(rec.BadFiles) > 0 {
				md[MetaStoreBadFiles] = strings.Join(rec.BadFiles, ",")
			}
			if reason != "" {
				reason += "; "
			}
			reason += "database recovered: " + rec.Cause.Error()
		}
		md[metaReasonKey] = reason
		l.mu.Lock()
		l.newSegment = true
		l.mu.Unlock()
		if _, err := l.Append(ctx, Event{Type: EventAuditChainBreak, Caller: "kernel", DenyReason: reason, Metadata: md}); err != nil {
			_ = l.Close()
			return nil, err
		}
	}
	return l, nil
}

func errReadOnly() error {
	return uerr.New(CodeReadOnly, "the audit log was opened read-only", "a read-only command never writes to the database",
		"append through the kernel, or open the log without ReadOnly")
}

// StartupReport is the tail verification Open performed.
func (l *Log) StartupReport() Report { return l.startup }

// loadHead finds the newest record to continue the chain from it.
func (l *Log) loadHead() error {
	err := l.db.View(func(txn *badger.Txn) error {
		h, hok, err := readHorizon(txn)
		if err != nil {
			return err
		}
		id, val, ok, err := lastRecord(txn)
		if err != nil {
			return err
		}
		head, headOK, err := readMark(txn, keyHead)
		if err != nil {
			return err
		}
		// Continue after the newest id ever written: the newest record, the
		// head mark (records deleted from the end must not have their ids
		// reused), or the retention horizon.
		l.nextID, l.newSegment = 1, true
		if hok && h.firstID > l.nextID {
			l.nextID, l.prevHash, l.newSegment = h.firstID, h.prev, false
		}
		if ok && id+1 >= l.nextID {
			l.nextID, l.newSegment = id+1, true
			if len(val) >= minEncLen+hashLen {
				copy(l.prevHash[:], val[len(val)-hashLen:])
				l.newSegment = false
			}
		}
		if headOK && head.firstID+1 > l.nextID {
			l.nextID, l.newSegment = head.firstID+1, true
		}
		return nil
	})
	if err != nil {
		return uerr.Wrap(err, CodeReadFailed, "cannot read the audit log head", err.Error(), "run `fluffy audit verify --all`")
	}
	return nil
}

func lastRecord(txn *badger.Txn) (uint64, []byte, bool, error) {
	io := badger.DefaultIteratorOptions
	io.Reverse, io.Prefix, io.PrefetchValues = true, []byte(prefixRecord), false
	it := txn.NewIterator(io)
	defer it.Close()
	for it.Seek(recKey(^uint64(0))); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) != len(prefixRecord)+8 {
			continue
		}
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return 0, nil, false, err
		}
		return binary.BigEndian.Uint64(k[len(prefixRecord):]), v, true, nil
	}
	return 0, nil, false, nil
}

// Append records ev and returns the stored record. A security event (see
// IsSecurity, or ev.Security) is on stable storage when Append returns
// without error; concurrent security events share one fsync. Operational
// events are buffered and written within FlushInterval.
func (l *Log) Append(ctx context.Context, ev Event) (Record, error) {
	if l.o.ReadOnly {
		return Record{}, errReadOnly()
	}
	rec, err := l.build(ev)
	if err != nil {
		return Record{}, err
	}
	sec := ev.Security || IsSecurity(ev.Type)

	l.mu.Lock()
	for !l.closed && l.failed == nil {
		b := l.lagging()
		if b == nil {
			break
		}
		l.kickLocked()
		l.mu.Unlock()
		<-b.done
		l.mu.Lock()
	}
	if l.closed {
		l.mu.Unlock()
		return Record{}, uerr.New(CodeClosed, "the audit log is closed", "Append was called after Close", "append before shutting the kernel down")
	}
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return Record{}, uerr.Wrap(err, CodeWriteFailed, "the audit log cannot write", err.Error(), "check free disk space; restart fluffy to start a new chain segment")
	}
	rec.ID = l.nextID
	l.nextID++
	rec.Timestamp = l.o.Clock.Now().UnixMilli()
	b := l.cur
	if l.newSegment {
		l.newSegment = false
		rec.Metadata[MetaGenesis] = strconv.FormatInt(l.startM, 10)
		rec.PrevHash = GenesisHash(l.startM)
		b.keys = append(b.keys, segKey(rec.ID))
		b.vals = append(b.vals, nil)
	} else {
		rec.PrevHash = l.prevHash
	}
	key, val := sealWithKey(&rec)
	l.prevHash = rec.Hash
	b.keys = append(b.keys, key)
	b.vals = append(b.vals, val)
	b.lastID, b.lastHash = rec.ID, rec.Hash
	if b.records == 0 {
		b.first = time.Now()
	}
	b.records++
	if sec {
		b.sync = true
		l.kickLocked()
	} else if b.records >= l.o.FlushEntries {
		l.kickLocked()
	}
	l.mu.Unlock()

	if !sec {
		return rec, nil
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return rec, fmt.Errorf("wait for durable audit write of record %d: %w", rec.ID, ctx.Err())
	}
	if b.err != nil {
		return rec, uerr.Wrap(b.err, CodeWriteFailed, fmt.Sprintf("audit record %d (%s) was not written", rec.ID, rec.EventType),
			b.err.Error(), "check free disk space and the .fluffy directory")
	}
	return rec, nil
}

// lagging returns the batch an appender must wait for before adding a
// record, or nil. Appenders wait when MaxPending records are pending, or when
// the oldest unwritten record is FlushInterval old (the writer is behind):
// so acknowledged operational events are never more than FlushInterval older
// than the newest acknowledged event when they reach badger, whatever the
// load — the crash window stays bounded. Called with l.mu held.
func (l *Log) lagging() *batch {
	if l.cur.records >= l.o.MaxPending {
		return l.cur
	}
	in := l.inflight
	if in == nil && l.cur.records == 0 {
		return nil
	}
	now := time.Now() // one clock read for both checks
	if in != nil && now.Sub(in.first) >= l.o.FlushInterval {
		return in
	}
	if l.cur.records > 0 && now.Sub(l.cur.first) >= l.o.FlushInterval {
		return l.cur
	}
	return nil
}

func (l *Log) kickLocked() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// preCap bounds the text a summary is made from, so redaction never
// scans megabytes to keep 500 runes.
func preCap(s string) string { return s[:runeCut(s, redactWindow)] }

// build validates ev and turns it into a record without id or hashes.
// Every string is bounded (fields.go).
func (l *Log) build(ev Event) (Record, error) {
	if err := validType(ev.Type); err != nil {
		return Record{}, err
	}
	if _, ok := ev.Metadata[MetaGenesis]; ok {
		return Record{}, uerr.New(CodeBadEvent, "event metadata uses the reserved key "+MetaGenesis,
			"that key marks the start of a chain segment and is set only by the audit log", "rename the metadata key")
	}
	caller := ev.Caller
	if caller == "" {
		caller = "kernel"
	}
	md := l.boundMetadata(ev.Metadata)
	f := func(v string) string { return l.bound(v, MaxFieldBytes, false) }
	return Record{
		EventType:         ev.Type,
		SyscallType:       f(ev.SyscallType),
		ToolName:          f(ev.ToolName),
		Caller:            f(caller),
		SessionID:         f(ev.SessionID),
		SessionMode:       f(ev.SessionMode),
		StateMachineState: f(ev.State),
		PolicyDecision:    f(ev.PolicyDecision),
		PolicyRuleName:    f(ev.PolicyRule),
		CapabilityID:      f(ev.CapabilityID),
		DenyReason:        l.bound(ev.DenyReason, MaxReasonBytes, true),
		InputSummary:      l.red.Summary(preCap(ev.Input), SummaryLimit),
		OutputSummary:     l.red.Summary(preCap(ev.Output), SummaryLimit),
		DurationMS:        ev.Duration.Milliseconds(),
		SandboxID:         f(ev.SandboxID),
		Metadata:          md,
	}, nil
}

func validType(t EventType) error {
	if t == "" || len(t) > 64 {
		return uerr.New(CodeBadEvent, fmt.Sprintf("invalid audit event type %q", t), "an event type is 1 to 64 characters",
			"use one of the audit.Event* constants")
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return uerr.New(CodeBadEvent, fmt.Sprintf("invalid audit event type %q", t),
				"event types use lowercase letters, digits, '_' and '.'", "use one of the audit.Event* constants")
		}
	}
	return nil
}

// run is the single writer: it writes batches strictly in id order, so the
// records on disk are always a prefix of the chain, even after a crash.
func (l *Log) run() {
	defer close(l.done)
	t := time.NewTicker(l.o.FlushInterval / 2)
	defer t.Stop()
	for {
		select {
		case <-l.kick:
		case <-t.C:
		case <-l.closing:
			for l.flushOnce() {
			}
			return
		}
		l.flushOnce()
	}
}

// flushOnce writes the pending batch, if any; it reports whether it did.
func (l *Log) flushOnce() bool {
	l.mu.Lock()
	b := l.cur
	if len(b.keys) == 0 {
		l.mu.Unlock()
		return false
	}
	l.cur = newBatch()
	l.inflight = b
	failed := l.failed
	l.mu.Unlock()
	if failed != nil {
		b.err = failed
	} else if err := l.write(b); err != nil {
		b.err = err
		l.log.Error("audit write failed", "error", err, "last_id", b.lastID)
		l.mu.Lock()
		l.failed = err
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.inflight = nil
	l.mu.Unlock()
	close(b.done)
	return true
}

func (l *Log) write(b *batch) error {
	err := l.db.WriteBatch(func(wb *badger.WriteBatch) error {
		for i, k := range b.keys {
			if err := wb.Set(k, b.vals[i]); err != nil {
				return fmt.Errorf("write audit record: %w", err)
			}
		}
		if err := wb.Set([]byte(keyHead), encodeMark(b.lastID, b.lastHash)); err != nil {
			return fmt.Errorf("write audit head: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write audit batch ending at %d: %w", b.lastID, err)
	}
	if b.sync {
		if err := l.db.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// Flush writes every pending record and waits until it is written (not
// necessarily synced).
func (l *Log) Flush() error {
	l.mu.Lock()
	b := l.cur
	if len(b.keys) == 0 || l.closed {
		l.mu.Unlock()
		return nil
	}
	l.kickLocked()
	l.mu.Unlock()
	<-b.done
	return b.err
}

// Close flushes pending records, stops the writer, and closes the database
// if Open opened it. Appending after Close fails with AUDIT_CLOSED.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.closing)
	<-l.done
	l.mu.Lock()
	err := l.failed
	l.mu.Unlock()
	if cerr := l.closeStore(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

func (l *Log) closeStore() error {
	if l.owned {
		return l.db.Close()
	}
	return nil
}

// ---- keys ----

const (
	prefixRecord  = store.PrefixAudit + "r/"
	prefixSegment = store.PrefixAudit + "s/"
	keyHorizon    = store.PrefixAudit + "m/horizon"
	keyHead       = store.PrefixAudit + "m/head"
)

func recKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, len(prefixRecord)+8), prefixRecord...), id)
}

// sealWithKey seals r (see seal) and returns its badger key and stored
// value, carved out of one allocation of the exact size; neither is
// modified once handed to a batch.
func sealWithKey(r *Record) (key, val []byte) {
	kv := make([]byte, 0, len(prefixRecord)+8+encodedLen(r)+hashLen)
	key = binary.BigEndian.AppendUint64(append(kv, prefixRecord...), r.ID)
	key = key[:len(key):len(key)]
	return key, seal(r, kv[len(key):len(key)])
}

func segKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append(make([]byte, 0, len(prefixSegment)+8), prefixSegment...), id)
}

// mark is an (id, hash) pair: the head, or the retention horizon (first id
// kept, and the hash its prev_hash must equal).
type mark struct {
	firstID uint64
	prev    Hash
}

func encodeMark(id uint64, h Hash) []byte {
	return append(binary.BigEndian.AppendUint64(nil, id), h[:]...)
}

func readMark(txn *badger.Txn, key string) (mark, bool, error) {
	item, err := txn.Get([]byte(key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return mark{}, false, nil
	}
	if err != nil {
		return mark{}, false, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return mark{}, false, err
	}
	if len(v) != 40 {
		return mark{}, false, nil
	}
	var m mark
	m.firstID = binary.BigEndian.Uint64(v[:8])
	copy(m.prev[:], v[8:])
	return m, true, nil
}

func readHorizon(txn *badger.Txn) (mark, bool, error) { return readMark(txn, keyHorizon) }
