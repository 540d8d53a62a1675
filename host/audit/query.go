package audit

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/store"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Filter selects records for Query. Zero fields match everything.
type Filter struct {
	Since, Until time.Time // inclusive bounds on the timestamp
	Types        []EventType
	SessionID    string
	// Limit caps the result. With Newest, the newest Limit matches are kept;
	// otherwise the oldest. Results are always oldest first.
	Limit  int
	Newest bool
}

func (f *Filter) match(r *Record) bool {
	if !f.Since.IsZero() && r.Timestamp < f.Since.UnixMilli() {
		return false
	}
	if !f.Until.IsZero() && r.Timestamp > f.Until.UnixMilli() {
		return false
	}
	if len(f.Types) > 0 && !slices.Contains(f.Types, r.EventType) {
		return false
	}
	if f.SessionID != "" && r.SessionID != f.SessionID {
		return false
	}
	return true
}

// Query returns the records f selects, oldest first. Pending records are
// flushed first, so a caller sees its own appends.
func (l *Log) Query(ctx context.Context, f Filter) ([]Record, error) {
	if err := l.Flush(); err != nil {
		return nil, err
	}
	var out []Record
	err := l.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix, io.Reverse = []byte(prefixRecord), f.Newest
		it := txn.NewIterator(io)
		defer it.Close()
		start := recKey(0)
		if f.Newest {
			start = recKey(^uint64(0))
		}
		n := 0
		for it.Seek(start); it.Valid(); it.Next() {
			if n++; n&0xfff == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if len(it.Item().Key()) != len(prefixRecord)+8 {
				continue
			}
			var rec Record
			var derr error
			if err := it.Item().Value(func(v []byte) error { rec, derr = decode(v); return nil }); err != nil {
				return err
			}
			if derr != nil {
				continue // unreadable records are Verify's business, not Query's
			}
			if !f.match(&rec) {
				continue
			}
			out = append(out, rec)
			if f.Limit > 0 && len(out) >= f.Limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, uerr.Wrap(err, CodeReadFailed, "cannot read the audit log", err.Error(), "run `fluffy audit verify --all`")
	}
	if f.Newest {
		slices.Reverse(out)
	}
	return out, nil
}

// Recent returns the newest n records of type t, oldest first — for example
// the last 100 policy decisions the policy engine replays against a new
// policy.
func (l *Log) Recent(ctx context.Context, n int, t EventType) ([]Record, error) {
	return l.Query(ctx, Filter{Types: []EventType{t}, Limit: n, Newest: true})
}

// exportHeader is the first line of an export. AnchorID/AnchorPrev are set
// when the oldest records were removed by retention: the first exported
// record must then have that id and prev_hash.
type exportHeader struct {
	Format     int    `json:"fluffy_audit_export"`
	ExportedAt int64  `json:"exported_at"`
	AnchorID   uint64 `json:"anchor_id,omitempty"`
	AnchorPrev Hash   `json:"anchor_prev_hash,omitzero"`
}

// Export writes every record as JSON Lines, oldest first, after a header
// line; VerifyJSONL checks the result on its own. It returns the number of
// records written.
func (l *Log) Export(ctx context.Context, w io.Writer) (int, error) {
	if err := l.Flush(); err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	n := 0
	err := l.db.View(func(txn *badger.Txn) error {
		h := exportHeader{Format: 1, ExportedAt: l.o.Clock.Now().UnixMilli()}
		if m, ok, err := readHorizon(txn); err != nil {
			return err
		} else if ok {
			h.AnchorID, h.AnchorPrev = m.firstID, m.prev
		}
		if err := enc.Encode(h); err != nil {
			return err
		}
		io := badger.DefaultIteratorOptions
		io.Prefix = []byte(prefixRecord)
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if n&0xfff == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			k := it.Item().Key()
			if len(k) != len(prefixRecord)+8 {
				continue
			}
			var rec Record
			var derr error
			if err := it.Item().Value(func(v []byte) error { rec, derr = decode(v); return nil }); err != nil {
				return err
			}
			if derr != nil {
				// Keep the slot visible: the verifier reports it as a break.
				if _, err := fmt.Fprintf(bw, "{\"unreadable_id\":%d}\n", binary.BigEndian.Uint64(k[len(prefixRecord):])); err != nil {
					return err
				}
				continue
			}
			if err := enc.Encode(rec); err != nil {
				return err
			}
			n++
		}
		return bw.Flush()
	})
	if err != nil {
		return n, uerr.Wrap(err, CodeReadFailed, "cannot export the audit log", err.Error(), "check the destination is writable and has space")
	}
	return n, nil
}

// Stats summarises the log.
type Stats struct {
	Records   uint64               `json:"records"`
	FirstID   uint64               `json:"first_id"`
	LastID    uint64               `json:"last_id"`
	FirstTime time.Time            `json:"first_time"`
	LastTime  time.Time            `json:"last_time"`
	Bytes     int64                `json:"bytes"`
	Segments  int                  `json:"segments"`
	ByType    map[EventType]uint64 `json:"by_type"`
	// HorizonID is the oldest id kept after retention (0: nothing removed).
	HorizonID uint64 `json:"horizon_id,omitempty"`
}

// Stats reads the whole log once.
func (l *Log) Stats(ctx context.Context) (Stats, error) {
	if err := l.Flush(); err != nil {
		return Stats{}, err
	}
	s := Stats{ByType: map[EventType]uint64{}}
	err := l.db.View(func(txn *badger.Txn) error {
		if m, ok, err := readHorizon(txn); err != nil {
			return err
		} else if ok {
			s.HorizonID = m.firstID
		}
		io := badger.DefaultIteratorOptions
		io.Prefix = []byte(store.PrefixAudit)
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.Key()
			switch {
			case len(k) == len(prefixSegment)+8 && string(k[:len(prefixSegment)]) == prefixSegment:
				s.Segments++
			case len(k) == len(prefixRecord)+8 && string(k[:len(prefixRecord)]) == prefixRecord:
				s.Bytes += item.EstimatedSize()
				var rec Record
				var derr error
				if err := item.Value(func(v []byte) error { rec, derr = decode(v); return nil }); err != nil {
					return err
				}
				id := binary.BigEndian.Uint64(k[len(prefixRecord):])
				if s.Records == 0 {
					s.FirstID = id
				}
				s.LastID = id
				s.Records++
				if derr != nil {
					s.ByType["(unreadable)"]++
					continue
				}
				if s.Records == 1 {
					s.FirstTime = rec.Time()
				}
				s.LastTime = rec.Time()
				s.ByType[rec.EventType]++
			}
			if s.Records&0xfff == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return s, uerr.Wrap(err, CodeReadFailed, "cannot read the audit log", err.Error(), "run `fluffy audit verify --all`")
	}
	return s, nil
}
