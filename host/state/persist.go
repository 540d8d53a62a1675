package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// Persistence error codes.
const (
	CodeStore       = "STATE_STORE"
	CodeChainBroken = "STATE_CHAIN_BROKEN"
	CodeBadSession  = "STATE_BAD_SESSION"
)

// Snapshot is everything needed to resume a session: the state, the mode,
// the changeset reference and the facts the guards judge.
type Snapshot struct {
	Session      string `json:"session"`
	State        State  `json:"state"`
	Mode         Mode   `json:"mode"`
	ChangesetRef string `json:"changeset_ref,omitempty"`
	// Task is the user's message that started the current task; Plan is
	// what the AI gave plan.complete.
	Task string `json:"task,omitempty"`
	Plan string `json:"plan,omitempty"`
	// Exemption is the current task's granted TDD exemption.
	Exemption *Exemption `json:"exemption,omitempty"`
	// WriteBase is the view hash writing started from: the red run's tree
	// in code_writing, the tree at entry in exploring and
	// retroactive_testing. "Code changes exist" means the view moved on.
	WriteBase string `json:"write_base,omitempty"`
	// RedRun opened code_writing; GreenRun passed validation.
	RedRun   *RunFacts `json:"red_run,omitempty"`
	GreenRun *RunFacts `json:"green_run,omitempty"`
	// Approval is the merge approval that opened committing.
	Approval *Approval `json:"approval,omitempty"`
	// Warning is the last budget warning of the task.
	Warning string `json:"warning,omitempty"`
}

// newTask clears the facts of the previous task.
func (s Snapshot) newTask() Snapshot {
	return Snapshot{Session: s.Session, State: s.State, Mode: s.Mode, ChangesetRef: s.ChangesetRef}
}

// RunFacts summarise a recorded test run.
type RunFacts struct {
	Status   testrun.Status `json:"status"`
	ViewHash string         `json:"view_hash"`
	Passed   int            `json:"passed"`
	Failed   int            `json:"failed"`
	Coverage *float64       `json:"coverage,omitempty"`
	At       time.Time      `json:"at"`
}

func factsOf(r testrun.Run, at time.Time) RunFacts {
	f := RunFacts{Status: r.Status, ViewHash: r.ViewHash, Passed: r.Counts.Passed, Failed: r.Counts.Failed, At: at.UTC()}
	if r.Coverage != nil {
		c := r.Coverage.Percent
		f.Coverage = &c
	}
	return f
}

// Approval is the outcome of a merge review.
type Approval struct {
	Approved bool      `json:"approved"`
	By       string    `json:"by"`             // "auto" or who approved
	Auto     bool      `json:"auto,omitempty"` // the auto-merge criteria approved it
	Note     string    `json:"note,omitempty"`
	At       time.Time `json:"at"`
}

// Record kinds in a session's state chain.
const (
	kindOpen       = "open"
	kindTransition = "transition"
	kindMode       = "mode"
	kindBreak      = "break"
)

// record is one link of a session's state chain. It is stored as its JSON
// encoding followed by the SHA-256 of that encoding (the record's hash);
// the encoding includes the previous record's hash, so each record commits
// to the session's whole history, as in host/audit.
type record struct {
	Seq      uint64   `json:"seq"`
	At       int64    `json:"at_ms"`
	Kind     string   `json:"kind"`
	Event    Event    `json:"event,omitempty"`
	From     State    `json:"from,omitempty"`
	FromMode Mode     `json:"from_mode,omitempty"`
	Snapshot Snapshot `json:"snapshot"`
	Actor    string   `json:"actor,omitempty"`
	Note     string   `json:"note,omitempty"`
	// Segment marks the first record after a detected break: its PrevHash
	// names the last record that still verified, and verification starts
	// again here.
	Segment  bool   `json:"segment,omitempty"`
	PrevHash string `json:"prev_hash"`
}

const hashLen = sha256.Size

var sessionIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkSessionID(id string) error {
	if !sessionIDRe.MatchString(id) {
		return uerr.New(CodeBadSession, fmt.Sprintf("invalid session id %q", id),
			"a session id is 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", "generate the id with the session")
	}
	return nil
}

// Keys: m/<session>/<seq, 8 bytes big-endian> for the chain, and
// m/!latest for the session written last ('!' never starts a session id).
const keyLatest = store.PrefixState + "!latest"

func sessionPrefix(id string) []byte { return []byte(store.PrefixState + id + "/") }

func recordKey(id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(sessionPrefix(id), seq)
}

func seal(r *record) (val []byte, hash [hashLen]byte, err error) {
	enc, err := json.Marshal(r)
	if err != nil {
		return nil, hash, fmt.Errorf("encode state record %d: %w", r.Seq, err)
	}
	hash = sha256.Sum256(enc)
	return append(enc, hash[:]...), hash, nil
}

// chain is what verification found in a session's records.
type chain struct {
	last     *record // newest record that verified
	lastHash [hashLen]byte
	records  int
	// broken describes the first break after the newest segment start.
	broken string
}

// loadChain reads and verifies a session's chain from its newest segment
// start. A damaged or relinked record is a break: the records before it
// are still used.
func loadChain(db *store.DB, id string) (chain, error) {
	var c chain
	type raw struct {
		seq uint64
		val []byte
	}
	var all []raw
	err := db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix = sessionPrefix(id)
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != len(io.Prefix)+8 {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			all = append(all, raw{binary.BigEndian.Uint64(k[len(io.Prefix):]), v})
		}
		return nil
	})
	if err != nil {
		return c, uerr.Wrap(err, CodeStore, "cannot read the state of session "+id, err.Error(), "run `fluffy audit verify --all` to check the database")
	}
	// Start at the newest record that parses as a segment start.
	start := 0
	for i := len(all) - 1; i >= 0; i-- {
		if r, ok := parse(all[i].val); ok && r.Segment {
			start = i
			break
		}
	}
	var prev [hashLen]byte
	for i := start; i < len(all); i++ {
		r, ok := parse(all[i].val)
		switch {
		case !ok:
			c.broken = fmt.Sprintf("record %d is damaged (its hash does not match its content)", all[i].seq)
		case r.Seq != all[i].seq:
			c.broken = fmt.Sprintf("record %d is stored under sequence %d", r.Seq, all[i].seq)
		case i > start && r.PrevHash != hex.EncodeToString(prev[:]):
			c.broken = fmt.Sprintf("record %d does not link to record %d", r.Seq, all[i-1].seq)
		case i > start && r.Seq != all[i-1].seq+1:
			c.broken = fmt.Sprintf("records %d to %d are missing", all[i-1].seq+1, r.Seq-1)
		}
		if c.broken != "" {
			break
		}
		copy(prev[:], all[i].val[len(all[i].val)-hashLen:])
		rr := r
		c.last, c.lastHash = &rr, prev
		c.records++
	}
	return c, nil
}

// parse checks a stored value's hash and decodes it.
func parse(val []byte) (record, bool) {
	var r record
	if len(val) < hashLen+2 {
		return r, false
	}
	enc, h := val[:len(val)-hashLen], val[len(val)-hashLen:]
	sum := sha256.Sum256(enc)
	if !bytes.Equal(sum[:], h) {
		return r, false
	}
	if err := json.Unmarshal(enc, &r); err != nil {
		return r, false
	}
	return r, true
}

// putRecord stores a sealed record and the latest-session mark.
func putRecord(db *store.DB, id string, seq uint64, val []byte) error {
	err := db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(recordKey(id, seq), val); err != nil {
			return err
		}
		return txn.Set([]byte(keyLatest), []byte(id))
	})
	if err != nil {
		return uerr.Wrap(err, CodeStore, "cannot store the state of session "+id, err.Error(), "check free disk space")
	}
	return nil
}

// dropRecord removes a record whose audit record could not be written: a
// transition that is not audited did not happen.
func dropRecord(db *store.DB, id string, seq uint64, prevLatest []byte) error {
	return db.Update(func(txn *badger.Txn) error {
		if err := txn.Delete(recordKey(id, seq)); err != nil {
			return err
		}
		if prevLatest != nil {
			return txn.Set([]byte(keyLatest), prevLatest)
		}
		return nil
	})
}

func readLatest(db *store.DB) (string, bool, error) {
	var id string
	err := db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte(keyLatest))
		if err != nil {
			return err
		}
		v, err := it.ValueCopy(nil)
		id = string(v)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, uerr.Wrap(err, CodeStore, "cannot read the latest session", err.Error(), "run `fluffy audit verify --all` to check the database")
	}
	return id, true, nil
}

// HistoryEntry is one persisted change of a session, for the agent and the
// REPL.
type HistoryEntry struct {
	Seq      uint64    `json:"seq"`
	At       time.Time `json:"at"`
	Kind     string    `json:"kind"` // open, transition, mode, break
	Event    Event     `json:"event,omitempty"`
	From     State     `json:"from,omitempty"`
	To       State     `json:"to"`
	FromMode Mode      `json:"from_mode,omitempty"`
	Mode     Mode      `json:"mode"`
	Actor    string    `json:"actor,omitempty"`
	Note     string    `json:"note,omitempty"`
}

// readHistory returns up to limit newest entries (all when limit <= 0),
// oldest first. Damaged records are skipped (verification reports them).
func readHistory(db *store.DB, id string, limit int) ([]HistoryEntry, error) {
	var out []HistoryEntry
	err := db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix, io.Reverse = sessionPrefix(id), true
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Seek(append(sessionPrefix(id), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)); it.Valid(); it.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			r, ok := parse(v)
			if !ok {
				continue
			}
			out = append(out, HistoryEntry{Seq: r.Seq, At: time.UnixMilli(r.At).UTC(), Kind: r.Kind, Event: r.Event, From: r.From,
				To: r.Snapshot.State, FromMode: r.FromMode, Mode: r.Snapshot.Mode, Actor: r.Actor, Note: r.Note})
		}
		return nil
	})
	if err != nil {
		return nil, uerr.Wrap(err, CodeStore, "cannot read the history of session "+id, err.Error(), "run `fluffy audit verify --all` to check the database")
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
