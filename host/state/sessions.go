package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Session error codes.
const (
	CodeSessionNotFound = "SESSION_NOT_FOUND"
	CodeSessionInvalid  = "SESSION_INVALID"
	CodeSessionStore    = "SESSION_STORE"
)

// SessionArchiveAge is the auto-cleanup age.
const SessionArchiveAge = 30 * 24 * time.Hour

// Message is one turn of conversation history.
type Message struct {
	Role    string    `json:"role"` // user, assistant, tool, system
	Content string    `json:"content"`
	At      time.Time `json:"at"`
}

// Session is one persisted session's conversation. Its workflow state, mode and changeset reference are the
// Machine's (Manager.Saved), and the tech-debt budget is the project's
// (Budget): they are not duplicated here.
type Session struct {
	ID         string    `json:"id"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	History    []Message `json:"history,omitempty"`
	ArchivedAt time.Time `json:"archived_at,omitzero"`
	// Title is the session's first task prompt (bounded by the caller).
	Title string `json:"title,omitempty"`
	// Conversation is the AI loop's own record of the conversation (what
	// host/agent carries between tasks), opaque here.
	Conversation json.RawMessage `json:"conversation,omitempty"`
}

// Archived reports whether the session was archived.
func (s Session) Archived() bool { return !s.ArchivedAt.IsZero() }

// Sessions stores sessions in the project database under store.PrefixSession.
type Sessions struct {
	db  *store.DB
	now func() time.Time
}

// NewSessions returns the session store of db; now may be nil (time.Now).
func NewSessions(db *store.DB, now func() time.Time) *Sessions {
	if now == nil {
		now = time.Now
	}
	return &Sessions{db: db, now: now}
}

func sessionKey(id string) []byte { return []byte(store.PrefixSession + id) }

// keyCurrent names the project's current session: the one its kernel
// opens ('!' never starts a session id, so List skips it).
const keyCurrent = store.PrefixSession + "!current"

// Save creates or replaces s, setting CreatedAt (if zero) and UpdatedAt.
func (ss *Sessions) Save(s *Session) error {
	if err := ss.db.Update(func(txn *badger.Txn) error { return ss.put(txn, s) }); err != nil {
		return saveErr(s.ID, err)
	}
	return nil
}

func saveErr(id string, err error) error {
	if _, ok := uerr.As(err); ok {
		return err
	}
	return uerr.Wrap(err, CodeSessionStore, "cannot save session "+id, err.Error(), "check free disk space")
}

// put writes s in txn, setting CreatedAt (if zero) and UpdatedAt.
func (ss *Sessions) put(txn *badger.Txn, s *Session) error {
	if !sessionIDRe.MatchString(s.ID) {
		return uerr.New(CodeSessionInvalid, "a session needs an id of 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", fmt.Sprintf("got %q", s.ID), "generate an id when creating the session")
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
	return txn.Set(sessionKey(s.ID), b)
}

func getSession(txn *badger.Txn, id string) (Session, bool, error) {
	var s Session
	if !sessionIDRe.MatchString(id) {
		return s, false, nil // no session can have it (nor can the pointer be read as one)
	}
	item, err := txn.Get(sessionKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	return s, true, item.Value(func(v []byte) error { return json.Unmarshal(v, &s) })
}

// Current returns the project's current session, creating it (with id
// first, and making it current) when the project has none: a project
// whose kernel predates the pointer keeps its one session.
func (ss *Sessions) Current(first string) (Session, error) {
	var cur Session
	err := ss.db.Update(func(txn *badger.Txn) error {
		id := first
		item, err := txn.Get([]byte(keyCurrent))
		switch {
		case err == nil:
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			id = string(v)
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		s, ok, err := getSession(txn, id)
		if err != nil {
			return err
		}
		cur = s
		if ok {
			return nil
		}
		cur = Session{ID: id}
		if err := ss.put(txn, &cur); err != nil {
			return err
		}
		return txn.Set([]byte(keyCurrent), []byte(id))
	})
	if err != nil {
		return cur, uerr.Wrap(err, CodeSessionStore, "cannot open the project's current session", err.Error(), "run `fluffy audit verify --all` to check the database")
	}
	return cur, nil
}

// CurrentID is the current session's id ("" when the project has none yet).
func (ss *Sessions) CurrentID() (string, error) {
	var id string
	err := ss.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(keyCurrent))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		id = string(v)
		return err
	})
	return id, err
}

// Archive marks session id archived and, in the same transaction, makes
// next (created when new) the current session; next "" leaves the current
// pointer alone. Archiving an archived session changes nothing.
func (ss *Sessions) Archive(id, next string) error {
	err := ss.db.Update(func(txn *badger.Txn) error {
		s, ok, err := getSession(txn, id)
		if err != nil {
			return err
		}
		if !ok {
			return notFound(id)
		}
		if !s.Archived() {
			s.ArchivedAt = ss.now().UTC()
			if err := ss.put(txn, &s); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		n, ok, err := getSession(txn, next)
		if err != nil {
			return err
		}
		if !ok {
			n = Session{ID: next}
		}
		n.ArchivedAt = time.Time{}
		if err := ss.put(txn, &n); err != nil {
			return err
		}
		return txn.Set([]byte(keyCurrent), []byte(next))
	})
	if err != nil {
		return saveErr(id, err)
	}
	return nil
}

// Start creates session id and makes it current; the previous current
// session stays as it is (not archived, its changes kept).
func (ss *Sessions) Start(id string) (Session, error) {
	s := Session{ID: id}
	err := ss.db.Update(func(txn *badger.Txn) error {
		if _, ok, err := getSession(txn, id); err != nil {
			return err
		} else if ok {
			return uerr.New(CodeSessionInvalid, "session "+id+" already exists", "a new session needs a new id", "generate another id")
		}
		if err := ss.put(txn, &s); err != nil {
			return err
		}
		return txn.Set([]byte(keyCurrent), []byte(id))
	})
	if err != nil {
		return s, saveErr(id, err)
	}
	return s, nil
}

// Resume makes session id current again, un-archiving it.
func (ss *Sessions) Resume(id string) (Session, error) {
	var s Session
	err := ss.db.Update(func(txn *badger.Txn) error {
		var ok bool
		var err error
		if s, ok, err = getSession(txn, id); err != nil {
			return err
		}
		if !ok {
			return notFound(id)
		}
		s.ArchivedAt = time.Time{}
		if err := ss.put(txn, &s); err != nil {
			return err
		}
		return txn.Set([]byte(keyCurrent), []byte(id))
	})
	if err != nil {
		return s, saveErr(id, err)
	}
	return s, nil
}

// Touch marks session id used now and gives it title when it has none.
func (ss *Sessions) Touch(id, title string) error {
	err := ss.db.Update(func(txn *badger.Txn) error {
		s, ok, err := getSession(txn, id)
		if err != nil {
			return err
		}
		if !ok {
			s = Session{ID: id}
		}
		if s.Title == "" {
			s.Title = title
		}
		return ss.put(txn, &s)
	})
	if err != nil {
		return saveErr(id, err)
	}
	return nil
}

// SaveConversation stores session id's conversation (see
// Session.Conversation).
func (ss *Sessions) SaveConversation(id string, conv json.RawMessage) error {
	err := ss.db.Update(func(txn *badger.Txn) error {
		s, ok, err := getSession(txn, id)
		if err != nil {
			return err
		}
		if !ok {
			s = Session{ID: id}
		}
		s.Conversation = conv
		return ss.put(txn, &s)
	})
	if err != nil {
		return saveErr(id, err)
	}
	return nil
}

// Saved is the persisted workflow snapshot of session id (its state and
// mode) without opening its machine; false when it never had one.
func (ss *Sessions) Saved(id string) (Snapshot, bool, error) {
	if err := checkSessionID(id); err != nil {
		return Snapshot{}, false, err
	}
	c, err := loadChain(ss.db, id)
	if err != nil || c.last == nil {
		return Snapshot{}, false, err
	}
	return c.last.Snapshot, true, nil
}

// History is up to limit newest workflow history entries of session id,
// oldest first, without opening its machine.
func (ss *Sessions) History(id string, limit int) ([]HistoryEntry, error) {
	return readHistory(ss.db, id, limit)
}

func notFound(id string) error {
	return uerr.New(CodeSessionNotFound, "no session "+textsafe.Line(id, 64), "the project database has no session with that id", "run `fluffy session list` to see the sessions")
}

// Load returns the session with id.
func (ss *Sessions) Load(id string) (Session, error) {
	var s Session
	var ok bool
	err := ss.db.View(func(txn *badger.Txn) error {
		var err error
		s, ok, err = getSession(txn, id)
		return err
	})
	if err == nil && !ok {
		return s, notFound(id)
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
			if string(it.Item().Key()) == keyCurrent {
				continue
			}
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

// ArchiveOld archives every session not updated for olderThan (default
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
