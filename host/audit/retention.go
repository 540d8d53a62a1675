package audit

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Retention bounds the log (audit.retention_days / max_size).
// Records are removed oldest first, one UTC day (an "archive") at a time for
// the size bound; the chain stays verifiable through the horizon mark, and
// every removal is itself recorded as audit_archive_deleted.
type Retention struct {
	// MaxAge removes records older than this (default 90 days; < 0 disables).
	MaxAge time.Duration
	// MaxBytes bounds the stored records (default 1 GiB; < 0 disables).
	// Over 80% records audit_storage_warning, over 95%
	// audit_storage_critical, over 100% removes the oldest days — but
	// never a record younger than MinAge.
	MaxBytes int64
	// MinAge protects recent history from the size bound (default 30
	// days; < 0 disables the protection): records younger than this are
	// never removed to satisfy MaxBytes, however much was written. Over
	// the bound with nothing old enough, retention records
	// audit_storage_critical with "blocked" and logs an error instead, so
	// a flood cannot erase what happened just before it.
	MinAge time.Duration
}

// Defaults: 90 days, 1 GiB.
const (
	DefaultMaxAge   = 90 * 24 * time.Hour
	DefaultMaxBytes = 1 << 30
	DefaultMinAge   = 30 * 24 * time.Hour
)

// Metadata keys of audit_archive_deleted (besides MetaFromID, MetaToID).
const (
	// MetaFirstKept is the first id kept after the removal.
	MetaFirstKept = "first_kept"
	// MetaLastHash is the hash of the last record removed: the prev_hash
	// the first kept record links to. Verify matches the retention horizon
	// against it.
	MetaLastHash = "last_hash"
	// MetaBlocked on audit_storage_critical: the size bound is exceeded
	// but every record is younger than MinAge, so none was removed.
	MetaBlocked = "blocked"
)

func (r *Retention) validate() error {
	if r.MaxAge == 0 {
		r.MaxAge = DefaultMaxAge
	}
	if r.MaxBytes == 0 {
		r.MaxBytes = DefaultMaxBytes
	}
	if r.MinAge == 0 {
		r.MinAge = DefaultMinAge
	}
	if r.MaxAge > 0 && r.MaxAge < time.Hour {
		return uerr.New(CodeBadRetention, fmt.Sprintf("audit retention of %s is too short", r.MaxAge),
			"keeping less than an hour of audit history defeats the log", "set retention to at least 1h (the default is 90 days)")
	}
	if r.MaxBytes > 0 && r.MaxBytes < 1<<20 {
		return uerr.New(CodeBadRetention, fmt.Sprintf("audit max size of %d bytes is too small", r.MaxBytes),
			"the log needs at least 1 MiB", "set max_size to at least 1MiB (the default is 1GiB)")
	}
	return nil
}

// Removal is one run of removed records.
type Removal struct {
	Reason string `json:"reason"` // "age" or "size"
	FromID uint64 `json:"from_id"`
	ToID   uint64 `json:"to_id"`
	Count  uint64 `json:"count"`
	Bytes  int64  `json:"bytes"`
	// LastHash is the hash of the last record removed.
	LastHash Hash `json:"last_hash"`
}

// RetentionReport says what ApplyRetention found and did.
type RetentionReport struct {
	UsageBytes int64     `json:"usage_bytes"` // before removals
	MaxBytes   int64     `json:"max_bytes"`
	Level      EventType `json:"level,omitempty"` // storage warning/critical event recorded, if any
	Removed    []Removal `json:"removed,omitempty"`
	// Blocked is set when the log is over MaxBytes but nothing older than
	// MinAge was left to remove.
	Blocked bool `json:"blocked,omitempty"`
}

// ApplyRetention enforces o.Retention now. The kernel calls it at start and
// every kernel.DefaultRetentionInterval (1 h) while it runs.
func (l *Log) ApplyRetention(ctx context.Context) (RetentionReport, error) {
	rep := RetentionReport{MaxBytes: l.o.Retention.MaxBytes}
	if l.o.ReadOnly {
		return rep, errReadOnly()
	}
	if err := l.Flush(); err != nil {
		return rep, err
	}
	now := l.o.Clock.Now()
	if l.o.Retention.MaxAge > 0 {
		cutoff := now.Add(-l.o.Retention.MaxAge).UnixMilli()
		rm, err := l.removeLeading(ctx, "age", func(r *Record, _ uint64) bool { return r.Timestamp < cutoff })
		if err != nil {
			return rep, err
		}
		if rm.Count > 0 {
			rep.Removed = append(rep.Removed, rm)
		}
	}
	if l.o.Retention.MaxBytes <= 0 {
		return rep, l.recordRemovals(ctx, rep.Removed)
	}
	usage, lastID, err := l.usage(ctx)
	if err != nil {
		return rep, err
	}
	rep.UsageBytes = usage
	pct := float64(usage) / float64(l.o.Retention.MaxBytes)
	if err := l.recordRemovals(ctx, rep.Removed); err != nil {
		return rep, err
	}
	switch {
	case pct > 0.95:
		rep.Level = EventAuditStorageCritical
	case pct > 0.80:
		rep.Level = EventAuditStorageWarning
	}
	protect := int64(0) // records at or after this time are never removed for size
	if l.o.Retention.MinAge > 0 {
		protect = now.Add(-l.o.Retention.MinAge).UnixMilli()
	}
	for usage > l.o.Retention.MaxBytes {
		var day string
		rm, err := l.removeLeading(ctx, "size", func(r *Record, id uint64) bool {
			if protect != 0 && r.Timestamp >= protect {
				return false
			}
			d := r.Time().UTC().Format(time.DateOnly)
			if day == "" {
				day = d
			}
			return d == day && id < lastID // never the newest record
		})
		if err != nil {
			return rep, err
		}
		if rm.Count == 0 {
			rep.Blocked = true
			break
		}
		usage -= rm.Bytes
		rep.Removed = append(rep.Removed, rm)
		if err := l.recordRemovals(ctx, []Removal{rm}); err != nil {
			return rep, err
		}
	}
	if rep.Blocked {
		// Loudly: the bound is exceeded and stays so until records age.
		rep.Level = EventAuditStorageCritical
		l.log.Error("AUDIT LOG OVER ITS SIZE BOUND: nothing was removed, every remaining record is younger than the protected age",
			"usage_bytes", usage, "max_bytes", l.o.Retention.MaxBytes, "min_age", l.o.Retention.MinAge.String())
	}
	if rep.Level != "" {
		md := map[string]string{
			"usage_bytes": strconv.FormatInt(rep.UsageBytes, 10), "max_bytes": strconv.FormatInt(l.o.Retention.MaxBytes, 10),
			"percent": strconv.FormatFloat(pct*100, 'f', 1, 64)}
		if rep.Blocked {
			md[MetaBlocked] = "records younger than " + l.o.Retention.MinAge.String() + " are never removed to satisfy the size bound; free space or raise max_size"
		}
		if _, err := l.Append(ctx, Event{Type: rep.Level, Caller: "kernel", Metadata: md}); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (l *Log) recordRemovals(ctx context.Context, rms []Removal) error {
	for _, rm := range rms {
		_, err := l.Append(ctx, Event{Type: EventAuditArchiveDeleted, Caller: "kernel", Metadata: map[string]string{
			metaReasonKey: rm.Reason, MetaFromID: strconv.FormatUint(rm.FromID, 10), MetaToID: strconv.FormatUint(rm.ToID, 10),
			"count": strconv.FormatUint(rm.Count, 10), "bytes": strconv.FormatInt(rm.Bytes, 10),
			MetaFirstKept: strconv.FormatUint(rm.ToID+1, 10), MetaLastHash: rm.LastHash.String()}})
		if err != nil {
			return err
		}
	}
	return nil
}

// usage sums the stored size of all records and returns the newest id.
func (l *Log) usage(ctx context.Context) (int64, uint64, error) {
	var total int64
	var last uint64
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix, io.PrefetchValues = []byte(prefixRecord), false
		it := txn.NewIterator(io)
		defer it.Close()
		n := 0
		for it.Rewind(); it.Valid(); it.Next() {
			if n++; n&0xfff == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			k := it.Item().Key()
			if len(k) == len(prefixRecord)+8 {
				total += it.Item().EstimatedSize()
				last = binary.BigEndian.Uint64(k[len(prefixRecord):])
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, uerr.Wrap(err, CodeReadFailed, "cannot measure the audit log", err.Error(), "run `fluffy audit verify --all`")
	}
	return total, last, nil
}

// removeLeading deletes the oldest records while keep-going(rec) holds, and
// moves the horizon past them.
func (l *Log) removeLeading(ctx context.Context, reason string, pred func(*Record, uint64) bool) (Removal, error) {
	rm := Removal{Reason: reason}
	var keys [][]byte
	var lastHash Hash
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix = []byte(prefixRecord)
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if len(keys)&0xfff == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			item := it.Item()
			k := item.Key()
			if len(k) != len(prefixRecord)+8 {
				continue
			}
			id := binary.BigEndian.Uint64(k[len(prefixRecord):])
			var rec Record
			var derr error
			if err := item.Value(func(v []byte) error { rec, derr = decode(v); return nil }); err != nil {
				return err
			}
			if derr != nil || !pred(&rec, id) {
				break
			}
			if rm.Count == 0 {
				rm.FromID = id
			}
			rm.ToID, rm.Count, lastHash = id, rm.Count+1, rec.Hash
			rm.Bytes += item.EstimatedSize()
			keys = append(keys, item.KeyCopy(nil))
		}
		return nil
	})
	if err != nil || rm.Count == 0 {
		return rm, err
	}
	rm.LastHash = lastHash
	err = l.db.WriteBatch(func(wb *badger.WriteBatch) error {
		for _, k := range keys {
			if err := wb.Delete(k); err != nil {
				return fmt.Errorf("delete old audit records: %w", err)
			}
			id := binary.BigEndian.Uint64(k[len(prefixRecord):])
			if err := wb.Delete(segKey(id)); err != nil {
				return fmt.Errorf("delete old audit records: %w", err)
			}
		}
		if err := wb.Set([]byte(keyHorizon), encodeMark(rm.ToID+1, lastHash)); err != nil {
			return fmt.Errorf("move audit horizon: %w", err)
		}
		return nil
	})
	if err != nil {
		return rm, fmt.Errorf("delete old audit records %d..%d: %w", rm.FromID, rm.ToID, err)
	}
	if err := l.db.Sync(); err != nil {
		return rm, err
	}
	l.log.Info("audit records removed by retention", "reason", reason, "from_id", rm.FromID, "to_id", rm.ToID, "count", rm.Count)
	return rm, nil
}
