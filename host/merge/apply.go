package merge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Operation states (the MergeOperation).
const (
	OpApplying = "applying" // written before any file is touched
	OpDone     = "done"     // every file landed or was reported
)

// File statuses in an operation.
const (
	FilePending  = "pending"
	FileLanded   = "landed"
	FileConflict = "conflict" // the project file is not the base any more: not written
	FileFailed   = "failed"   // could not be written (see Error)
)

// OpFile is one file of a merge operation.
type OpFile struct {
	Path    string      `json:"path"`
	Base    string      `json:"base"`
	New     string      `json:"new"`
	Delete  bool        `json:"delete,omitempty"`
	Mode    fs.FileMode `json:"mode"`
	Content string      `json:"content,omitempty"` // host file holding the new content
	Ranges  []Range     `json:"ranges"`
	Status  string      `json:"status"`
	// Already: the project had the new content before this merge (see
	// FileDiff.InProject); landed, not audited again.
	Already bool   `json:"already,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Operation is one merge as the merge log keeps it: written (and synced)
// before the first file is touched, so that a kernel killed mid-merge can
// finish it (Resume) or say exactly which files landed.
type Operation struct {
	ID      string    `json:"id"`
	Project string    `json:"project"`
	Session string    `json:"session"`
	Model   string    `json:"model,omitempty"`
	By      string    `json:"by,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	State   string    `json:"state"`
	Files   []OpFile  `json:"files"`
	// Audited is set once merge_approved was recorded for every landed
	// file.
	Audited bool `json:"audited,omitempty"`
}

// Landed are the paths that reached the project.
func (op *Operation) Landed() []string { return op.with(FileLanded) }

// Conflicts are the paths left alone because the user changed them.
func (op *Operation) Conflicts() []string { return op.with(FileConflict) }

// Failed are the paths that could not be written.
func (op *Operation) Failed() []string { return op.with(FileFailed) }

func (op *Operation) with(status string) []string {
	var out []string
	for _, f := range op.Files {
		if f.Status == status {
			out = append(out, f.Path)
		}
	}
	return out
}

func opKey(id string) []byte { return []byte(store.PrefixMerge + id) }

func (m *Merger) save(op *Operation, sync bool) error {
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	if err := m.o.DB.Update(func(txn *badger.Txn) error { return txn.Set(opKey(op.ID), b) }); err != nil {
		return uerr.Wrap(err, CodeApply, "cannot write the merge log", err.Error(), "check free disk space in the project's .fluffy directory")
	}
	if sync {
		if err := m.o.DB.Sync(); err != nil {
			return uerr.Wrap(err, CodeApply, "cannot write the merge log", err.Error(), "check free disk space in the project's .fluffy directory")
		}
	}
	return nil
}

// Apply merges the approved paths of r into the project: the merge log
// first, then each file atomically (temp file in the same directory, fsync,
// rename, directory fsync; mode preserved), re-checking right before each
// file that the project still holds the base; a conflict is never
// written. Paths of r not approved are left alone. merge_approved is
// recorded per landed file with its changed ranges.
func (m *Merger) Apply(ctx context.Context, r *Review, approved []string) (*Operation, error) {
	byPath := map[string]FileDiff{}
	for _, f := range r.Files {
		byPath[f.Path] = f
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	op := &Operation{ID: strconv.FormatInt(m.o.Now().UnixMilli(), 10) + "-" + hex.EncodeToString(id[:]), Project: r.Project,
		Session: r.Session, Model: r.Model, By: r.By, Started: m.o.Now(), State: OpApplying}
	seen := map[string]bool{}
	for _, p := range approved {
		f, ok := byPath[p]
		if !ok {
			return nil, uerr.New(CodeNotInLog, fmt.Sprintf("%q is not in the review", p), "only reviewed files can be approved", "approve paths the review lists")
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		of := OpFile{Path: f.Path, Base: f.Base, New: f.New, Delete: f.Delete, Mode: f.Mode, Content: f.ContentPath, Ranges: f.Ranges, Status: FilePending}
		switch {
		case f.InProject:
			of.Status, of.Already = FileLanded, true
		case f.Conflict:
			of.Status = FileConflict
		}
		op.Files = append(op.Files, of)
	}
	slices.SortFunc(op.Files, func(a, b OpFile) int { return strings.Compare(a.Path, b.Path) })
	if err := m.mu.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.unlock()
	if err := m.save(op, true); err != nil {
		return nil, err
	}
	return op, m.run(ctx, op)
}

// Resume finishes every merge the log holds as unfinished (a kernel killed
// mid-merge): a file whose project content is already the new one counts
// as landed, one still at its base is written, anything else is a
// conflict. It returns the operations it finished.
func (m *Merger) Resume(ctx context.Context) ([]*Operation, error) {
	if err := m.mu.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.unlock()
	ops, err := m.Operations(true)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if err := m.run(ctx, op); err != nil {
			return ops, err
		}
	}
	return ops, nil
}

// Operations lists the merge log (only unfinished operations when
// unfinished), oldest first.
func (m *Merger) Operations(unfinished bool) ([]*Operation, error) {
	var ops []*Operation
	err := m.o.DB.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(store.PrefixMerge), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			op := &Operation{}
			if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, op) }); err != nil {
				return fmt.Errorf("merge log entry %s: %w", it.Item().Key(), err)
			}
			if !unfinished || op.State != OpDone || !op.Audited {
				ops = append(ops, op)
			}
		}
		return nil
	})
	if err != nil {
		return nil, uerr.Wrap(err, CodeApply, "cannot read the merge log", err.Error(), "check the project's .fluffy/db")
	}
	return ops, nil
}

// run applies op's pending files and finishes it.
func (m *Merger) run(ctx context.Context, op *Operation) error {
	root, err := confine.OpenRoot(op.Project)
	if err != nil {
		return uerr.Wrap(err, CodeApply, "cannot open the project "+op.Project, err.Error(), "check that the project directory exists")
	}
	defer root.Close()
	m.cleanTemps(root, op)
	for i := range op.Files {
		f := &op.Files[i]
		if f.Status != FilePending {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		f.Status, f.Error = m.applyFile(root, op.ID, i, f)
		if f.Status == FileFailed {
			m.log.Error("merge: file not written", "path", f.Path, "error", f.Error)
		}
		if err := m.save(op, false); err != nil {
			return err
		}
		if m.o.afterFile != nil {
			if err := m.o.afterFile(op.ID, f.Path); err != nil {
				return err
			}
		}
	}
	op.State, op.Ended = OpDone, m.o.Now()
	if err := m.save(op, true); err != nil {
		return err
	}
	if !op.Audited {
		for _, f := range op.Files {
			if f.Status != FileLanded || f.Already {
				continue
			}
			if err := m.record(ctx, audit.EventMergeApproved, op.ID, op.By, op.Session, op.Model, f.Path, f.Ranges, ""); err != nil {
				return err
			}
		}
		op.Audited = true
		if err := m.save(op, true); err != nil {
			return err
		}
	}
	var failed []string
	for _, f := range op.Files {
		if f.Status == FileFailed {
			failed = append(failed, f.Path+": "+f.Error)
		}
	}
	if len(failed) > 0 {
		return uerr.New(CodeApply, fmt.Sprintf("%d of %d files could not be merged", len(failed), len(op.Files)),
			strings.Join(failed, "; "), "fix the cause and merge the remaining files again; every other file landed or is reported")
	}
	return nil
}

func tempName(op string, i int) string { return fmt.Sprintf(".fluffy-merge-%s-%d.tmp", op, i) }

// cleanTemps removes temp files an interrupted apply of op left.
func (m *Merger) cleanTemps(root *confine.Root, op *Operation) {
	for i, f := range op.Files {
		_ = root.OS().Remove(path.Join(path.Dir(f.Path), tempName(op.ID, i)))
	}
}

// applyFile lands one file and returns its status.
func (m *Merger) applyFile(root *confine.Root, opID string, i int, f *OpFile) (string, string) {
	cur, _, err := current(root, f.Path)
	if err != nil {
		return FileFailed, err.Error()
	}
	if cur.odd {
		return FileConflict, ""
	}
	if f.Delete {
		if !cur.exists {
			return FileLanded, ""
		}
	} else if cur.hash == f.New {
		return FileLanded, ""
	}
	if cur.hash != f.Base {
		return FileConflict, ""
	}
	dir := path.Dir(f.Path)
	if f.Delete {
		if err := root.OS().Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return FileFailed, err.Error()
		}
		if err := syncDir(root, dir); err != nil {
			return FileFailed, err.Error()
		}
		return FileLanded, ""
	}
	b, err := os.ReadFile(f.Content)
	if err != nil {
		return FileFailed, "cannot read the proposed content: " + err.Error()
	}
	if hash(b) != f.New {
		return FileFailed, "the proposed content changed on disk"
	}
	mode := f.Mode
	if cur.exists {
		mode = cur.mode
	}
	if mode == 0 {
		mode = 0o644
	}
	if dir != "." {
		if err := root.OS().MkdirAll(dir, 0o755); err != nil {
			return FileFailed, err.Error()
		}
	}
	// The temporary's name is the merge operation's, so Resume removes one
	// a killed kernel left.
	err = atomicfile.Replace(root.OS(), f.Path, mode, atomicfile.Options{Temp: tempName(opID, i)}, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return FileFailed, err.Error()
	}
	return FileLanded, ""
}

func syncDir(root *confine.Root, dir string) error {
	d, err := root.OS().Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Reject records merge_rejected for paths of r (all of them when none are
// given) with the reviewer's reason. Nothing is written; the caller
// discards the changes from the session if it wants.
func (m *Merger) Reject(ctx context.Context, r *Review, reason string, paths ...string) error {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	for _, f := range r.Files {
		if len(paths) > 0 && !want[f.Path] {
			continue
		}
		delete(want, f.Path)
		if err := m.record(ctx, audit.EventMergeRejected, "", r.By, r.Session, r.Model, f.Path, f.Ranges, reason); err != nil {
			return err
		}
	}
	for p := range want {
		return uerr.New(CodeNotInLog, fmt.Sprintf("%q is not in the review", p), "only reviewed files can be rejected", "reject paths the review lists")
	}
	return nil
}

func (m *Merger) record(ctx context.Context, t audit.EventType, opID, by, session, model, p string, rs []Range, reason string) error {
	b, err := json.Marshal(rs)
	if err != nil {
		return err
	}
	md := map[string]string{audit.MetaPath: p, "ranges": string(b), "model": model}
	if opID != "" {
		md["merge_op"] = opID
	}
	if by == "" {
		by = "user"
	}
	_, err = m.o.Audit.Append(ctx, audit.Event{Type: t, Caller: by, SessionID: session, DenyReason: reason, Metadata: md})
	if err != nil {
		return fmt.Errorf("record %s for %s: %w", t, p, err)
	}
	return nil
}
