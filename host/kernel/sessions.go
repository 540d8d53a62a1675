package kernel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/state"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// FirstSession is the id of a project's first session (the one session of
// projects from before sessions could be archived).
const FirstSession = "kernel"

// CodeSessionPending refuses to archive a session with proposed changes.
const CodeSessionPending = "SESSION_PENDING_CHANGES"

// SessionSummary describes one of the project's sessions.
type SessionSummary struct {
	ID       string    `json:"id"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
	Mode     string    `json:"mode"`
	State    string    `json:"state"`
	Pending  int       `json:"pending_changes"`
	Archived bool      `json:"archived,omitempty"`
	// Current: the session this kernel serves.
	Current bool   `json:"current,omitempty"`
	Title   string `json:"title,omitempty"`
}

// ArchiveResult is what ArchiveSession did.
type ArchiveResult struct {
	Archived string `json:"archived"`
	// Dropped are the proposed changes --force discarded.
	Dropped []string `json:"dropped,omitempty"`
	// Current is the project's current session afterwards; Switch means it
	// is not the one this kernel serves (the kernel must be restarted).
	Current string `json:"current"`
	Switch  bool   `json:"switch,omitempty"`
}

// ListSessions describes every session of the project, archived ones
// included, newest update first.
func (k *Kernel) ListSessions() ([]SessionSummary, error) {
	all, err := k.SessionStore.List(true)
	if err != nil {
		return nil, err
	}
	out := make([]SessionSummary, 0, len(all))
	for _, s := range all {
		sum, err := k.summary(s)
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, nil
}

// DescribeSession describes session id (SESSION_NOT_FOUND when the
// project has none by that id).
func (k *Kernel) DescribeSession(id string) (SessionSummary, error) {
	if err := knownID(id); err != nil {
		return SessionSummary{}, err
	}
	s, err := k.SessionStore.Load(id)
	if err != nil {
		return SessionSummary{}, err
	}
	return k.summary(s)
}

// SessionHistory is up to limit newest workflow history entries of
// session id, oldest first.
func (k *Kernel) SessionHistory(id string, limit int) ([]state.HistoryEntry, error) {
	if err := knownID(id); err != nil {
		return nil, err
	}
	return k.SessionStore.History(id, limit)
}

func (k *Kernel) summary(s state.Session) (SessionSummary, error) {
	sum := SessionSummary{ID: s.ID, Created: s.CreatedAt, Updated: s.UpdatedAt, Archived: s.Archived(), Title: s.Title,
		Mode: string(state.Strict), State: string(state.Idle), Current: s.ID == k.Session.ID()}
	if snap, ok, err := k.SessionStore.Saved(s.ID); err != nil {
		return sum, err
	} else if ok {
		sum.Mode, sum.State = string(snap.Mode), string(snap.State)
	}
	if sum.Current {
		sum.Pending = len(k.Session.Changes())
		return sum, nil
	}
	n, err := workspace.SavedChanges(k.ProjectDB, s.ID)
	sum.Pending = n
	return sum, err
}

// TouchSession marks the served session used now; a session's first task
// prompt becomes its title.
func (k *Kernel) TouchSession(prompt string) {
	if err := k.SessionStore.Touch(k.Session.ID(), textsafe.Line(strings.TrimSpace(prompt), 80)); err != nil {
		k.log.Warn("cannot record the session's use", "session", k.Session.ID(), "error", err)
	}
}

// SaveConversation keeps the served session's conversation (after each
// task and pin) so resuming the session, or a restarted kernel, continues
// it.
func (k *Kernel) SaveConversation(c agent.Conversation) {
	b, err := json.Marshal(c)
	if err == nil {
		err = k.SessionStore.SaveConversation(k.Session.ID(), b)
	}
	if err != nil {
		k.log.Warn("cannot save the session's conversation", "session", k.Session.ID(), "error", err)
	}
}

// RestoreConversation gives a the served session's saved conversation.
func (k *Kernel) RestoreConversation(a *agent.Agent) error {
	c, err := k.SavedConversation(k.Session.ID())
	if err != nil {
		return err
	}
	a.Restore(c)
	return nil
}

// SavedConversation is session id's saved conversation (empty when none).
func (k *Kernel) SavedConversation(id string) (agent.Conversation, error) {
	var c agent.Conversation
	if err := knownID(id); err != nil {
		return c, err
	}
	s, err := k.SessionStore.Load(id)
	if err != nil || len(s.Conversation) == 0 {
		return c, err
	}
	if err := json.Unmarshal(s.Conversation, &c); err != nil {
		return c, uerr.Wrap(err, state.CodeSessionStore, "the saved conversation of session "+s.ID+" is damaged", err.Error(),
			"the session continues without it; `fluffy session new` starts a fresh one")
	}
	return c, nil
}

// ArchiveSession archives session id ("" = the served one). A running
// task refuses it; so do proposed changes not merged yet, unless force
// drops them. Archiving the served session makes a new, empty session
// current: the kernel serving the archived one must then be restarted
// (ArchiveResult.Switch).
func (k *Kernel) ArchiveSession(ctx context.Context, id string, force, running bool) (ArchiveResult, error) {
	served := k.Session.ID()
	if id == "" {
		id = served
	}
	sum, err := k.DescribeSession(id)
	if err != nil {
		return ArchiveResult{}, err
	}
	res := ArchiveResult{Archived: id, Current: served}
	if id == served && running {
		return res, uerr.New(task.CodeTaskRunning, "session "+id+" has a running task", "archiving it would pull the session from under the task",
			"wait for the task to finish or cancel it (Ctrl-C in the REPL, `fluffy attach` then Ctrl-C), then archive")
	}
	if sum.Pending > 0 {
		if !force {
			return res, uerr.New(CodeSessionPending, fmt.Sprintf("session %s has %d proposed change(s) not merged", id, sum.Pending),
				"archiving would leave them neither merged nor dropped",
				"merge or drop them first (`fluffy session resume "+id+"` then `fluffy`: review them, or /undo), or archive with --force to drop them")
		}
		if id == served {
			for _, c := range k.Session.Changes() {
				res.Dropped = append(res.Dropped, c.Path)
			}
			err = k.Session.Discard()
		} else {
			res.Dropped, err = workspace.DropSavedChanges(k.ProjectDB, k.home, k.workspace, id)
		}
		if err != nil {
			return res, err
		}
		_, _ = k.Audit.Append(ctx, audit.Event{Type: audit.EventMergeRejected, SessionID: id, Caller: "user",
			DenyReason: "session archived with --force", Metadata: map[string]string{"dropped": strconv.Itoa(len(res.Dropped))}})
	}
	next := ""
	if id == served {
		next = newSessionID(time.Now())
		res.Current, res.Switch = next, true
	}
	if err := k.SessionStore.Archive(id, next); err != nil {
		return res, err
	}
	return res, nil
}

// NewSession makes a new, empty session the project's current one; the
// served session is left as it is (its state, mode and proposed changes
// wait for `fluffy session resume`). The kernel must then be restarted
// to serve the new one; a running task refuses it.
func (k *Kernel) NewSession(running bool) (string, error) {
	if running {
		return "", uerr.New(task.CodeTaskRunning, "a task is running in session "+k.Session.ID(),
			"the kernel serves one session at a time and would have to leave it", "wait for the task to finish or cancel it, then start a new session")
	}
	id := newSessionID(time.Now())
	if _, err := k.SessionStore.Start(id); err != nil {
		return "", err
	}
	return id, nil
}

// ResumeSession makes session id the project's current session again
// (un-archived). It returns the session and whether the kernel must be
// restarted to serve it (it serves another one); a running task refuses
// that switch.
func (k *Kernel) ResumeSession(id string, running bool) (SessionSummary, bool, error) {
	if _, err := k.DescribeSession(id); err != nil {
		return SessionSummary{}, false, err
	}
	sw := id != k.Session.ID()
	if sw && running {
		return SessionSummary{}, false, uerr.New(task.CodeTaskRunning, "a task is running in session "+k.Session.ID(),
			"the kernel serves one session at a time and would have to leave it", "wait for the task to finish or cancel it, then resume "+id)
	}
	if _, err := k.SessionStore.Resume(id); err != nil {
		return SessionSummary{}, false, err
	}
	sum, err := k.DescribeSession(id)
	return sum, sw, err
}

// knownID refuses an id no session can have, with the id escaped.
func knownID(id string) error {
	if id == "" || len(id) > 128 || strings.ContainsAny(id, "/!") || !textsafe.Clean(id, true) {
		return uerr.New(state.CodeSessionNotFound, "no session "+textsafe.Line(id, 64), "the project has no session with that id",
			"run `fluffy session list` to see the sessions")
	}
	return nil
}

// newSessionID names a new session by its creation time (sortable, and
// readable in `fluffy session list`).
func newSessionID(now time.Time) string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}
