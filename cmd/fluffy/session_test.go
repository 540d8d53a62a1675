package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/test/harness"
)

// seedChange writes one proposed change into session id's persisted
// changeset (badger record + blob), as an ingest leaves it, while no
// kernel holds the project database.
func seedChange(t *testing.T, home, project, id, path, content string) {
	t.Helper()
	db, err := store.Open(context.Background(), store.Options{Dir: store.DefaultDir(project)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := sha256.Sum256([]byte(content))
	hash := hex.EncodeToString(h[:])
	blobs := filepath.Join(workspace.SessionsDir(home), id, "blobs")
	if err := os.MkdirAll(blobs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(blobs, hash), []byte(content), 0o444); err != nil {
		t.Fatal(err)
	}
	c := workspace.Change{Path: path, Hash: hash, Size: int64(len(content)), Mode: 0o644, Plugin: "tool-fs", Tool: "fs.write", CallID: "c1", Time: time.Now()}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte(store.PrefixChanges+id+"/"+path), b)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestSessionsNewArchiveResume drives several sessions of one project
// through real kernel processes (--l1 none) and the project's badger
// database: a session with a proposed change and explore mode cannot be
// archived without --force; a new session starts empty and strict; resuming
// the first brings back its mode, its pending change, its pinned text and
// its history;
// unknown ids are refused; list shows every session and the current one.
func TestSessionsNewArchiveResume(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("needs git")
	}
	fluffy := fluffyLayout(t, "provider-replay")
	home := shortHome(t)
	ws := demoProject(t, fluffy, home, "../../examples/cassettes/parseconfig.jsonl")
	env := append(os.Environ(), "FLUFFY_HOME="+home, "FLUFFY_L1=none", "FLUFFY_SANDBOX=none")
	run := harness.User{T: t, Fluffy: fluffy, Dir: ws, Env: env}.Run
	must := func(args ...string) string {
		t.Helper()
		out, errs, code := run(args...)
		if code != 0 {
			t.Fatalf("fluffy %v: exit %d\n%s%s", args, code, out, errs)
		}
		return out
	}
	list := func() map[string]daemon.SessionInfo {
		t.Helper()
		var l []daemon.SessionInfo
		if err := json.Unmarshal([]byte(must("session", "list", "--json")), &l); err != nil {
			t.Fatal(err)
		}
		m := map[string]daemon.SessionInfo{}
		for _, s := range l {
			m[s.ID] = s
		}
		return m
	}
	t.Cleanup(func() { run("kernel", "stop") })

	seedChange(t, home, ws, "kernel", "NOTES.md", "proposed\n")
	first := list()
	if s := first["kernel"]; len(first) != 1 || !s.Current || s.Pending != 1 || s.Mode != "strict" {
		t.Fatalf("first list: %+v", first)
	}
	// The person switches the session to explore mode (the REPL's /explore).
	cl, err := ipc.Dial(context.Background(), daemon.PathsFor(home, ws).Socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Call(context.Background(), daemon.MethodSessionMode, daemon.SessionParams{Mode: "explore"}, nil); err != nil {
		t.Fatal(err)
	}
	// ... and pins a text (the REPL's /pin): part of the conversation.
	if _, err := cl.Call(context.Background(), daemon.MethodSessionPin, daemon.SessionParams{Text: "use tabs"}, nil); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	for _, c := range []struct {
		args []string
		code string
	}{
		{[]string{"session", "archive"}, "SESSION_PENDING_CHANGES"},
		{[]string{"session", "resume", "nope"}, "SESSION_NOT_FOUND"},
		{[]string{"session", "archive", "nope"}, "SESSION_NOT_FOUND"},
		{[]string{"session", "show", "no\x1bpe"}, "SESSION_NOT_FOUND"},
	} {
		out, errs, code := run(c.args...)
		if code == 0 || !strings.Contains(errs, c.code) || strings.Contains(errs, "\x1b") {
			t.Fatalf("fluffy %q: exit %d, want %s\n%s%s", c.args, code, c.code, out, errs)
		}
	}

	// A new session: empty, strict, current; the first is kept as it was.
	var nr daemon.ArchiveResult
	if err := json.Unmarshal([]byte(must("session", "new", "--json")), &nr); err != nil || nr.Current == "" || !nr.Restart {
		t.Fatalf("session new: %+v %v", nr, err)
	}
	second := list()
	if s := second[nr.Current]; len(second) != 2 || !s.Current || s.Pending != 0 || s.Mode != "strict" || s.State != "idle" {
		t.Fatalf("after session new: %+v", second)
	}
	if s := second["kernel"]; s.Current || s.Archived || s.Pending != 1 || s.Mode != "explore" {
		t.Fatalf("the first session changed: %+v", s)
	}
	type conversation struct {
		Pins []string `json:"pins"`
	}
	var shown struct {
		Session daemon.SessionInfo `json:"session"`
		History []struct {
			Kind string `json:"kind"`
			Mode string `json:"mode"`
		} `json:"history"`
		Conversation conversation `json:"conversation"`
	}
	if err := json.Unmarshal([]byte(must("session", "show", "kernel")), &shown); err != nil {
		t.Fatal(err)
	}
	if last := shown.History[len(shown.History)-1]; shown.Session.ID != "kernel" || last.Mode != "explore" || len(shown.Conversation.Pins) != 1 {
		t.Fatalf("show kernel: %+v", shown)
	}
	var fresh struct {
		Conversation conversation `json:"conversation"`
	}
	if err := json.Unmarshal([]byte(must("session", "show")), &fresh); err != nil || len(fresh.Conversation.Pins) != 0 {
		t.Fatalf("the new session has a conversation: %+v %v", fresh, err)
	}

	// Resume the first: the kernel restarts on it with its mode, state,
	// pending change and history.
	if out := must("session", "resume", "kernel"); !strings.Contains(out, "explore mode") || !strings.Contains(out, "1 pending") {
		t.Fatalf("resume: %s", out)
	}
	var cur struct {
		Status       daemon.SessionStatus `json:"status"`
		History      []json.RawMessage    `json:"history"`
		Conversation conversation         `json:"conversation"` // the restarted kernel's agent
	}
	if err := json.Unmarshal([]byte(must("session", "show")), &cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.Session != "kernel" || cur.Status.Mode != "explore" || cur.Status.Pending != 1 || len(cur.History) < len(shown.History) ||
		len(cur.Conversation.Pins) != 1 || cur.Conversation.Pins[0] != "use tabs" {
		t.Fatalf("resumed: %+v (%d history entries, had %d)", cur, len(cur.History), len(shown.History))
	}

	// Archiving another session; then the current one with --force drops
	// its change and starts a fresh current session.
	must("session", "archive", nr.Current)
	out := must("session", "archive", "--force")
	if !strings.Contains(out, "dropped 1 proposed change") || !strings.Contains(out, "NOTES.md") || !strings.Contains(out, "is current") {
		t.Fatalf("archive --force: %s", out)
	}
	third := list()
	if len(third) != 3 || !third["kernel"].Archived || third["kernel"].Pending != 0 || !third[nr.Current].Archived {
		t.Fatalf("after archiving: %+v", third)
	}
	for id, s := range third {
		if s.Current != (id != "kernel" && id != nr.Current) {
			t.Fatalf("current marker: %+v", third)
		}
	}
	// An archived session can be resumed (and is no longer archived).
	must("session", "resume", nr.Current)
	if s := list()[nr.Current]; s.Archived || !s.Current {
		t.Fatalf("resumed archived session: %+v", s)
	}
	// `kernel stop` returns once the kernel has exited: a script may then
	// delete the project (a kernel still closing its database under a
	// removed directory retried its flush forever).
	ws2, _ := existingDir(ws)
	if out := must("kernel", "stop"); !strings.Contains(out, "kernel stopped") || !lockFree(daemon.PathsFor(home, ws2).Lock) {
		t.Fatalf("kernel stop returned %q with the kernel still holding its lock", out)
	}
}
