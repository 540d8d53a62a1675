package audit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Error codes.
const (
	CodeChainBreak   = "AUDIT_CHAIN_BREAK"
	CodeBadEvent     = "AUDIT_BAD_EVENT"
	CodeClosed       = "AUDIT_CLOSED"
	CodeWriteFailed  = "AUDIT_WRITE_FAILED"
	CodeBadExport    = "AUDIT_BAD_EXPORT"
	CodeReadFailed   = "AUDIT_READ_FAILED"
	CodeBadRetention = "AUDIT_BAD_RETENTION"
	CodeReadOnly     = "AUDIT_READ_ONLY"
)

// maxBreaks caps how many breaks a report lists (the first is what matters).
const maxBreaks = 100

// Break is one place the chain does not hold.
type Break struct {
	ID     uint64 `json:"id"`
	Reason string `json:"reason"`
}

// Report is the result of a verification.
type Report struct {
	// All is true when every record was checked, false for a tail check.
	All bool `json:"all"`
	// FromID..ToID is the range checked; Checked counts records read.
	FromID  uint64 `json:"from_id"`
	ToID    uint64 `json:"to_id"`
	Checked uint64 `json:"checked"`
	// Segments are the ids where a chain segment begins (genesis records).
	Segments []uint64 `json:"segments,omitempty"`
	// RecordedBreaks are the ids of audit_chain_break records: breaks (or
	// database recoveries) found earlier, after which a segment began.
	RecordedBreaks []uint64 `json:"recorded_breaks,omitempty"`
	// Quarantines are the recorded breaks written after the database was
	// found damaged and moved aside: records before them that were not
	// salvaged are gone from this log (kept in the quarantined directory).
	Quarantines []Quarantine `json:"quarantines,omitempty"`
	// Breaks lists where the chain fails, first first (at most 100).
	Breaks      []Break `json:"breaks,omitempty"`
	TotalBreaks int     `json:"total_breaks"`
	// Horizon is set when retention removed the oldest records: the chain
	// checked begins after a deletion, and verify says so.
	Horizon *Horizon `json:"horizon,omitempty"`
}

// Horizon describes the retention horizon a verification started from.
type Horizon struct {
	// FirstKept is the first id kept; LastRemovedHash the hash of the last
	// record removed (the first kept record's prev_hash).
	FirstKept       uint64 `json:"first_kept"`
	LastRemovedHash Hash   `json:"last_removed_hash"`
	// RecordedBy is the audit_archive_deleted record stating this removal
	// (its first_kept and last_hash match), 0 if none was seen. A full
	// verification without one is a break: records were removed outside
	// retention.
	RecordedBy uint64 `json:"recorded_by,omitempty"`
	// Reason and FromID come from that record ("age" or "size").
	Reason string `json:"reason,omitempty"`
	FromID uint64 `json:"from_id,omitempty"`
}

// Quarantine is one recorded move of a damaged database aside.
type Quarantine struct {
	// ID is the audit_chain_break record saying so; the new segment
	// begins there.
	ID uint64 `json:"id"`
	// MovedTo is where the damaged directory went; Reason why it was
	// judged damaged; BadFiles the damaged files; SalvagedKeys how many
	// keys were copied into the fresh database.
	MovedTo      string `json:"moved_to"`
	Reason       string `json:"reason"`
	BadFiles     string `json:"bad_files,omitempty"`
	SalvagedKeys string `json:"salvaged_keys,omitempty"`
}

// OK reports whether no break was found.
func (r Report) OK() bool { return r.TotalBreaks == 0 }

// FirstBad is the id of the first break, 0 if none.
func (r Report) FirstBad() uint64 {
	if len(r.Breaks) == 0 {
		return 0
	}
	return r.Breaks[0].ID
}

// Err returns an AUDIT_CHAIN_BREAK error naming the first bad id, or nil.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	b := r.Breaks[0]
	return uerr.New(CodeChainBreak, fmt.Sprintf("audit chain broken at record %d", b.ID),
		fmt.Sprintf("%s (%d break(s) in records %d..%d)", b.Reason, r.TotalBreaks, r.FromID, r.ToID),
		"inspect the records around that id with `fluffy audit log`; the log has started a new chain segment after it, and the damaged records are kept as evidence").
		WithContext("first_bad_id=%d", b.ID)
}

// verifier walks records in id order and checks the chain.
type verifier struct {
	rep       *Report
	started   bool
	prevID    uint64
	prevHash  Hash
	prevKnown bool
	// anchor, when set, is the expected first id and prev_hash (retention
	// horizon or tail start).
	anchorSet  bool
	anchorID   uint64
	anchorHash Hash
	anchorHas  bool // anchorHash is known
	// horizon, when set, is matched against audit_archive_deleted records.
	horizon *Horizon
}

var archiveDeletedPrefix = appendString(nil, string(EventAuditArchiveDeleted))

// noteRemoval matches an audit_archive_deleted record against the horizon.
func (v *verifier) noteRemoval(key uint64, body []byte) {
	if v.horizon == nil || !bytes.HasPrefix(body[hdrLen:], archiveDeletedPrefix) {
		return
	}
	r, err := decode(append(body[:len(body):len(body)], make([]byte, hashLen)...))
	if err != nil {
		return
	}
	fk, _ := strconv.ParseUint(r.Metadata[MetaFirstKept], 10, 64)
	if fk == 0 { // written before first_kept existed
		to, _ := strconv.ParseUint(r.Metadata[MetaToID], 10, 64)
		fk = to + 1
	}
	if fk != v.horizon.FirstKept {
		return
	}
	if h, ok := r.Metadata[MetaLastHash]; ok && h != v.horizon.LastRemovedHash.String() {
		return
	}
	v.horizon.RecordedBy, v.horizon.Reason = key, r.Metadata[metaReasonKey]
	v.horizon.FromID, _ = strconv.ParseUint(r.Metadata[MetaFromID], 10, 64)
}

// finishHorizon reports a horizon no retention record states.
func (v *verifier) finishHorizon() {
	if v.horizon == nil || v.horizon.RecordedBy != 0 {
		return
	}
	v.brk(v.horizon.FirstKept, fmt.Sprintf("records before %d were removed without an audit_archive_deleted record stating it (removed outside fluffy's retention, or its record was lost)", v.horizon.FirstKept))
}

func (v *verifier) brk(id uint64, reason string) {
	v.rep.TotalBreaks++
	if len(v.rep.Breaks) < maxBreaks {
		v.rep.Breaks = append(v.rep.Breaks, Break{ID: id, Reason: reason})
	}
}

// isGenesis reports whether r begins a chain segment.
func isGenesis(r *Record) bool {
	ms, ok := r.Metadata[MetaGenesis]
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	return err == nil && GenesisHash(n) == r.PrevHash
}

// next checks the stored value val found under key.
func (v *verifier) next(key uint64, val []byte) {
	v.rep.Checked++
	first := !v.started
	if first {
		v.rep.FromID = key
	}
	v.rep.ToID = key
	gap := false
	switch {
	case !first && key != v.prevID+1:
		gap = true
		v.brkMissing(v.prevID+1, key-1)
	case first && v.anchorSet && key != v.anchorID:
		gap = true
		v.brkMissing(v.anchorID, key-1)
	}
	v.started = true
	v.prevID = key

	if len(val) < minEncLen+hashLen || val[0] != encVersion {
		v.brk(key, "record is unreadable (truncated or unknown encoding)")
		v.prevKnown = false
		return
	}
	body := val[:len(val)-hashLen]
	var stored Hash
	copy(stored[:], val[len(val)-hashLen:])
	wantKnown, want := false, Hash{}
	if first {
		wantKnown, want = v.anchorSet && v.anchorHas, v.anchorHash
	} else {
		wantKnown, want = !gap && v.prevKnown, v.prevHash
	}
	v.prevHash, v.prevKnown = stored, true

	if id := binary.BigEndian.Uint64(body[1:9]); id != key {
		v.brk(key, fmt.Sprintf("slot %d holds record %d (records moved or reordered)", key, id))
		return
	}
	if sha256.Sum256(body) != stored {
		v.brk(key, "hash does not match the record's content (record altered)")
		return
	}
	v.noteRemoval(key, body)
	var prev Hash
	copy(prev[:], body[17:49])
	if wantKnown && prev == want {
		return
	}
	// Not linked to its predecessor: legitimate only at a segment start.
	r, err := decode(val)
	switch {
	case err != nil:
		v.brk(key, "record is unreadable: "+err.Error())
	case isGenesis(&r):
		v.rep.Segments = append(v.rep.Segments, key)
		if r.EventType == EventAuditChainBreak {
			v.rep.RecordedBreaks = append(v.rep.RecordedBreaks, key)
			if q := r.Metadata[MetaStoreQuarantine]; q != "" {
				v.rep.Quarantines = append(v.rep.Quarantines, Quarantine{ID: key, MovedTo: q,
					Reason: r.Metadata[metaReasonKey], BadFiles: r.Metadata[MetaStoreBadFiles], SalvagedKeys: r.Metadata[MetaStoreSalvaged]})
			}
		}
	case wantKnown && first:
		v.brk(key, "prev_hash does not match the hash of the last record removed by retention")
	case wantKnown:
		v.brk(key, fmt.Sprintf("prev_hash does not match the hash of record %d", key-1))
	case first && !v.anchorSet:
		v.brk(key, "the chain does not begin with a genesis record")
	}
}

func (v *verifier) brkMissing(from, to uint64) {
	if from == to {
		v.brk(from, fmt.Sprintf("record %d is missing", from))
		return
	}
	v.brk(from, fmt.Sprintf("records %d..%d are missing", from, to))
}

// Verify checks the chain: every record when all is true, otherwise the tail
// Open checks (the newest TailVerify records, never reaching back past the
// newest segment start). Pending records are flushed first. A break is not an
// error: it is in the Report (use Report.Err); the error is for failing to
// read at all.
func (l *Log) Verify(ctx context.Context, all bool) (Report, error) {
	if err := l.Flush(); err != nil {
		return Report{}, err
	}
	if all {
		return l.verifyAll(ctx)
	}
	return l.verifyTail(ctx)
}

func (l *Log) verifyAll(ctx context.Context) (Report, error) {
	rep := Report{All: true}
	v := &verifier{rep: &rep}
	err := l.db.View(func(txn *badger.Txn) error {
		h, ok, err := readHorizon(txn)
		if err != nil {
			return err
		}
		from := uint64(0)
		if ok {
			from = h.firstID
			v.anchorSet, v.anchorID, v.anchorHash, v.anchorHas = true, h.firstID, h.prev, true
			v.horizon = &Horizon{FirstKept: h.firstID, LastRemovedHash: h.prev}
			rep.Horizon = v.horizon
		}
		if err := l.walk(ctx, txn, v, from); err != nil {
			return err
		}
		v.finishHorizon()
		return nil
	})
	if err != nil {
		return rep, uerr.Wrap(err, CodeReadFailed, "cannot read the audit log", err.Error(), "check the database with `fluffy audit stats`")
	}
	return rep, nil
}

func (l *Log) verifyTail(ctx context.Context) (Report, error) {
	rep := Report{}
	v := &verifier{rep: &rep}
	err := l.db.View(func(txn *badger.Txn) error {
		last, _, ok, err := lastRecord(txn)
		if err != nil || !ok {
			return err
		}
		h, hok, err := readHorizon(txn)
		if err != nil {
			return err
		}
		from := uint64(1)
		if last > uint64(l.o.TailVerify) {
			from = last - uint64(l.o.TailVerify) + 1
		}
		if hok {
			// A tail check does not read back to the record of the
			// removal; it still says there was one (--all matches it).
			v.horizon = &Horizon{FirstKept: h.firstID, LastRemovedHash: h.prev}
			rep.Horizon = v.horizon
		}
		seg, sok := lastSegment(txn)
		if sok && seg > from && seg <= last {
			from = seg
		}
		switch {
		case hok && h.firstID >= from:
			from = h.firstID
			v.anchorSet, v.anchorID, v.anchorHash, v.anchorHas = true, h.firstID, h.prev, true
		case sok && seg == from:
			// a segment start needs no anchor: it must be a genesis record
			v.anchorSet, v.anchorID = true, from
		case from > 1:
			v.anchorSet, v.anchorID = true, from
			if item, err := txn.Get(recKey(from - 1)); err == nil {
				_ = item.Value(func(val []byte) error {
					if len(val) >= minEncLen+hashLen {
						copy(v.anchorHash[:], val[len(val)-hashLen:])
						v.anchorHas = true
					}
					return nil
				})
			}
		}
		return l.walk(ctx, txn, v, from)
	})
	if err != nil {
		return rep, uerr.Wrap(err, CodeReadFailed, "cannot read the audit log", err.Error(), "check the database with `fluffy audit stats`")
	}
	return rep, nil
}

func lastSegment(txn *badger.Txn) (uint64, bool) {
	io := badger.DefaultIteratorOptions
	io.Reverse, io.Prefix, io.PrefetchValues = true, []byte(prefixSegment), false
	it := txn.NewIterator(io)
	defer it.Close()
	for it.Seek(segKey(^uint64(0))); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) == len(prefixSegment)+8 {
			return binary.BigEndian.Uint64(k[len(prefixSegment):]), true
		}
	}
	return 0, false
}

// walk feeds every record from id `from` on to v, then checks the head mark
// (which catches records deleted from the end of the chain).
func (l *Log) walk(ctx context.Context, txn *badger.Txn, v *verifier, from uint64) error {
	io := badger.DefaultIteratorOptions
	io.Prefix, io.PrefetchSize = []byte(prefixRecord), 1000
	it := txn.NewIterator(io)
	defer it.Close()
	n := 0
	for it.Seek(recKey(from)); it.Valid(); it.Next() {
		if n++; n&0xfff == 0 {
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
		if err := item.Value(func(val []byte) error { v.next(id, val); return nil }); err != nil {
			return err
		}
	}
	head, ok, err := readMark(txn, keyHead)
	if err != nil || !ok {
		return err
	}
	switch {
	case !v.started && v.rep.Checked == 0:
		if head.firstID >= from && from > 0 {
			v.brkMissing(from, head.firstID)
		}
	case head.firstID > v.prevID:
		v.brkMissing(v.prevID+1, head.firstID)
	case head.firstID == v.prevID && v.prevKnown && head.prev != v.prevHash:
		v.brk(v.prevID, "the newest record differs from the one last written")
	}
	return nil
}

// VerifyJSONL checks an export written by Export on its own, without the
// database: the same rules as Verify(all), anchored at the export's header.
func VerifyJSONL(ctx context.Context, r io.Reader) (Report, error) {
	rep := Report{All: true}
	v := &verifier{rep: &rep}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	line := 0
	var buf []byte
	for sc.Scan() {
		line++
		if line&0xfff == 0 {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
		}
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if line == 1 && bytes.Contains(b, []byte(`"fluffy_audit_export"`)) {
			var h exportHeader
			if err := json.Unmarshal(b, &h); err != nil || h.Format != 1 {
				return rep, uerr.New(CodeBadExport, "the export header is not valid", fmt.Sprintf("line 1: %v", err), "verify a file written by `fluffy audit export`")
			}
			if h.AnchorID != 0 {
				v.anchorSet, v.anchorID, v.anchorHash, v.anchorHas = true, h.AnchorID, h.AnchorPrev, true
				if h.AnchorID > 1 {
					v.horizon = &Horizon{FirstKept: h.AnchorID, LastRemovedHash: h.AnchorPrev}
					rep.Horizon = v.horizon
				}
			}
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			// An unreadable line is a break at the id that should be there.
			id := v.prevID + 1
			if !v.started {
				id = max(v.anchorID, 1)
			}
			v.brk(id, fmt.Sprintf("line %d is not a valid record: %s", line, strings.TrimSpace(err.Error())))
			v.started, v.prevID, v.prevKnown = true, id, false
			continue
		}
		// Re-encode from the JSON fields: any altered field changes the hash.
		buf = appendEncoding(buf[:0], &rec)
		buf = append(buf, rec.Hash[:]...)
		v.next(rec.ID, buf)
	}
	if err := sc.Err(); err != nil {
		return rep, uerr.Wrap(err, CodeBadExport, "cannot read the export", fmt.Sprintf("after line %d: %v", line, err), "check the file is a complete JSONL export")
	}
	v.finishHorizon()
	if rep.Checked == 0 && rep.TotalBreaks == 0 {
		return rep, uerr.New(CodeBadExport, "the export holds no records", "nothing to verify", "export with `fluffy audit export` from a project with audit records")
	}
	return rep, nil
}
