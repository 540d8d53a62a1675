package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/uerr"
)

// Session error codes.
const (
	CodeSessionNotFound = "SESSION_NOT_FOUND"
	CodeSessionInvalid  = "SESSION_INVALID"
	CodeSessionStore    = "SESSION_STORE"
)

// SessionArchiveAge is seed 000's auto-cleanup age.
const SessionArchiveAge = 30 * 24 * time.Hour

// Message is one turn of conversation history.
type Message struct {
	Role    string    `json:"role"` // user, assistant, tool, system
	Content string    `json:"content"`
	At      time.Time `json:"at"`
}

// Session is one persisted session's conversation (seed 000 "Session
// Management"). Its workflow state, mode and changeset reference are the
// Machine's (Manager.Saved), and the tech-debt budget is the project's
// (Budget): they are not duplicated here.
type Session struct {
	ID         string    `json:"id"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	History    []Message `json:"history,omitempty"`
	ArchivedAt time.Time `json:"archived_at,omitzero"`
}

// Archived reports whether the session was archived.
func (s Session) Archived() bool { return !s.ArchivedAt.IsZero() }

// Sessions stores sessions in the project database under store.PrefixSession.
type Sessions struct {
	db  *badger.DB
	now func() time.Time
}

// NewSessions returns the session store of db; now may be nil (time.Now).
func NewSessions(db *store.DB, now func() time.Time) *Sessions {
	if now == nil {
		now = time.Now
	}
	return &Sessions{db: db.Badger(), now: now}
}

func sessionKey(id string) []byte { return []byte(store.PrefixSession + id) }

// Save creates or replaces s, setting CreatedAt (if zero) and UpdatedAt.
func (ss *Sessions) Save(s *Session) error {
	if s.ID == "" || len(s.ID) > 128 {
		return uerr.New(CodeSessionInvalid, "a session needs an id of 1 to 128 characters", fmt.Sprintf("got %q", s.ID), "generate an id when creating the session")
	}
	now := ss.now().UTC()
	if s.CreatedAt.IsZero() {
		s.CreatedAt = now
	}
	s.UpdatedAt = now
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode session %s: %w", s.ID, err)
	}
	if err := ss.db.Update(func(txn *badger.Txn) error { return txn.Set(sessionKey(s.ID), b) }); err != nil {
		return uerr.Wrap(err, CodeSessionStore, "cannot save session "+s.ID, err.Error(), "check free disk space")
	}
	return nil
}

// Load returns the session with id.
func (ss *Sessions) Load(id string) (Session, error) {
	var s Session
	err := ss.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(sessionKey(id))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &s) })
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return s, uerr.New(CodeSessionNotFound, "no session "+id, "the project database has no session with that id", "run `fluffy session list` to see the sessions")
	}
	if err != nil {
		return s, uerr.Wrap(err, CodeSessionStore, "cannot load session "+id, err.Error(), "run `fluffy audit verify --all` to check the database")
	}
	return s, nil
}

// List returns sessions, newest update first; archived ones only if asked.
func (ss *Sessions) List(includeArchived bool) ([]Session, error) {
	var out []Session
	err := ss.db.View(func(txn *badger.Txn) error {
		io := badger.DefaultIteratorOptions
		io.Prefix = []byte(store.PrefixSession)
		it := txn.NewIterator(io)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var s Session
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &s) }); err != nil {
				return fmt.Errorf("session %s: %w", it.Item().Key(), err)
			}
			if includeArchived || !s.Archived() {
				out = append(out, s)
			}
		}
		return nil
	})
	if err != nil {
		return nil, uerr.Wrap(err, CodeSessionStore, "cannot list sessions", err.Error(), "run `fluffy audit verify --all` to check the database")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UpdatedAt.After(out[j].UpdatedAt) })
	return out, nil
}

// ArchiveOld archives every session not updated for olderThan (seed 000:
// 30 days) and returns their ids. Archived sessions stay loadable.
func (ss *Sessions) ArchiveOld(olderThan time.Duration) ([]string, error) {
	all, err := ss.List(false)
	if err != nil {
		return nil, err
	}
	cutoff := ss.now().Add(-olderThan)
	var ids []string
	err = ss.db.Update(func(txn *badger.Txn) error {
		for _, s := range all {
			if !s.UpdatedAt.Before(cutoff) {
				continue
			}
			s.ArchivedAt = ss.now().UTC()
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			if err := txn.Set(sessionKey(s.ID), b); err != nil {
				return err
			}
			ids = append(ids, s.ID)
		}
		return nil
	})
	if err != nil {
		return nil, uerr.Wrap(err, CodeSessionStore, "cannot archive old sessions", err.Error(), "check free disk space")
	}
	sort.Strings(ids)
	return ids, nil
}
