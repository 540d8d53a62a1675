package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"

	"github.com/fluffy-waffle/fluffy/host/proposal"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// Error codes of Ingest.
const (
	// CodeStale: the change was written against content that is not what
	// the session's view holds now (the optimistic locking).
	CodeStale = "STALE_FILE"
	// CodeOutputInvalid: the tool's output directory or change list is
	// malformed or hostile (a link, a path out of it, a bad hash).
	CodeOutputInvalid = "WORKSPACE_OUTPUT_INVALID"
	// CodeOutputTooLarge: a file or the whole call exceeds Limits.
	CodeOutputTooLarge = "WORKSPACE_OUTPUT_TOO_LARGE"
	// CodeWriteDenied: the policy denies writing the path.
	CodeWriteDenied = "WORKSPACE_WRITE_DENIED"
	// CodeWriteInvalid: the change cannot be made to the path (a
	// directory, a special file, a parent that is a file).
	CodeWriteInvalid = "WORKSPACE_WRITE_INVALID"
)

// Default limits.
const (
	DefaultMaxFileBytes = 16 << 20 // one file's content (tool-fs accepts 16 MiB)
	DefaultMaxCallBytes = 64 << 20 // every artifact of one call
	DefaultMaxFiles     = 1000     // changes in one call
)

// Limits bound what one call may propose. Zero fields take the defaults.
type Limits struct {
	MaxFileBytes int64
	MaxCallBytes int64
	MaxFiles     int
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxCallBytes <= 0 {
		l.MaxCallBytes = DefaultMaxCallBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}

// Identify returns the policy request a plugin's writes are judged as:
// caller (with the registry's tags), sandbox template, session mode and
// workflow state. Ingest sets Syscall, Path and Size. The kernel builds it
// the way the router judges the call (router.Requests).
type Identify func(ctx context.Context, plugin, tool string) (policy.Request, error)

// Proposal is one tool call's contribution to a changeset entry.
type Proposal struct {
	Plugin string    `json:"plugin"`
	Tool   string    `json:"tool"`
	CallID string    `json:"call_id"`
	Time   time.Time `json:"time"`
	// Before and After are the content hashes the call went from and to
	// ("" = absent).
	Before string `json:"before"`
	After  string `json:"after"`
}

// Change is one path of the changeset: what the session proposes the
// project file become.
type Change struct {
	Path string `json:"path"`
	// Base is the sha256 of the project file when the session first
	// changed it ("" = it did not exist). Merge calls a project file whose
	// hash differs from Base a conflict: the user changed it meanwhile.
	Base string `json:"base"`
	// Delete proposes removing the file; otherwise Hash is the sha256 of
	// the new content, Size its length and Mode its permission bits.
	Delete bool        `json:"delete,omitempty"`
	Hash   string      `json:"hash,omitempty"`
	Size   int64       `json:"size,omitempty"`
	Mode   fs.FileMode `json:"mode,omitempty"`
	// Plugin, Tool, CallID and Time name the latest proposal.
	Plugin string    `json:"plugin"`
	Tool   string    `json:"tool"`
	CallID string    `json:"call_id"`
	Time   time.Time `json:"time"`
	// Review holds the policy's reasons when it sends writing this path to
	// review: such a change is never merged without a person.
	Review []string `json:"review,omitempty"`
	// History lists every proposal, oldest first.
	History []Proposal `json:"history"`

	// Session is the session id; ContentPath is the host file holding the
	// new content (read-only; "" for a deletion). Set by Changes.
	Session     string `json:"-"`
	ContentPath string `json:"-"`
}

func (c Change) entry() overlayEntry {
	if c.Delete {
		return overlayEntry{Delete: true}
	}
	return overlayEntry{Blob: c.Hash, Exec: c.Mode&0o111 != 0}
}

func (c Change) clone() Change {
	c.Review = slices.Clone(c.Review)
	c.History = slices.Clone(c.History)
	return c
}

func (s *Session) changeKey(p string) []byte {
	return []byte(store.PrefixChanges + s.id + "/" + p)
}

// loadChanges reads the session's changeset from the project database.
func (s *Session) loadChanges() error {
	s.changes = map[string]Change{}
	files := map[string]overlayEntry{}
	var lost []string
	if s.o.DB != nil {
		prefix := s.changeKey("")
		err := s.o.DB.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 64})
			defer it.Close()
			for it.Rewind(); it.Valid(); it.Next() {
				var c Change
				if err := it.Item().Value(func(v []byte) error { return json.Unmarshal(v, &c) }); err != nil {
					return fmt.Errorf("changeset entry %s: %w", it.Item().Key(), err)
				}
				if confine.Check(c.Path) != "" || string(prefix)+c.Path != string(it.Item().Key()) {
					return fmt.Errorf("changeset entry %s names path %q", it.Item().Key(), c.Path)
				}
				if !c.Delete {
					// Blobs are not fsynced (nor is this record): after a
					// machine crash a blob may be gone or torn. Such an
					// entry is dropped, never shown with wrong content.
					b, err := os.ReadFile(filepath.Join(s.blobDir(), c.entry().blobName()))
					if err != nil {
						b, err = s.legacyBlob(c)
					}
					if err != nil || sum(b) != c.Hash {
						s.log.Warn("changeset content lost; dropping the change", "path", c.Path, "error", err)
						lost = append(lost, c.Path)
						_ = os.Remove(filepath.Join(s.blobDir(), c.entry().blobName()))
						continue
					}
				}
				s.changes[c.Path] = c
				files[c.Path] = c.entry()
			}
			return nil
		})
		if err != nil {
			return uerr.Wrap(err, CodeIO, "cannot read the changeset of session "+s.id, err.Error(),
				"the session's data under "+s.dir+" is incomplete; discard the session and start again")
		}
		if err := s.persist(nil, lost); err != nil {
			return err
		}
	}
	s.ov = overlay{version: 1, files: files}
	return nil
}

// Changes returns the changeset, sorted by path.
func (s *Session) Changes() []Change {
	s.mu.Lock()
	out := make([]Change, 0, len(s.changes))
	for _, c := range s.changes {
		c = c.clone()
		c.Session = s.id
		if !c.Delete {
			c.ContentPath = filepath.Join(s.blobDir(), c.entry().blobName())
		}
		out = append(out, c)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Discard drops paths from the changeset (all of it when none are given):
// the views show the project's file again from their next refresh. Paths
// not in the changeset are ignored.
func (s *Session) Discard(paths ...string) error {
	s.ingestMu.Lock()
	defer s.ingestMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var drop []string
	if len(paths) == 0 {
		for p := range s.changes {
			drop = append(drop, p)
		}
	} else {
		for _, p := range paths {
			if c, err := confine.Clean(p); err == nil {
				if _, ok := s.changes[c]; ok {
					drop = append(drop, c)
				}
			}
		}
	}
	if len(drop) == 0 {
		return nil
	}
	if err := s.persist(nil, drop); err != nil {
		return err
	}
	files := make(map[string]overlayEntry, len(s.ov.files))
	for p, e := range s.ov.files {
		files[p] = e
	}
	for _, p := range drop {
		delete(s.changes, p)
		delete(files, p)
	}
	s.ov = overlay{version: s.ov.version + 1, files: files}
	return nil
}

// persist writes set and deletes del in one transaction.
func (s *Session) persist(set []Change, del []string) error {
	if s.o.DB == nil {
		return nil
	}
	err := s.o.DB.Update(func(txn *badger.Txn) error {
		for _, c := range set {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			if err := txn.Set(s.changeKey(c.Path), b); err != nil {
				return err
			}
		}
		for _, p := range del {
			if err := txn.Delete(s.changeKey(p)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return uerr.Wrap(err, CodeIO, "cannot save the session's changeset", err.Error(), "check free disk space in the project's .fluffy directory")
	}
	return nil
}

// Ingest takes one call's proposed changes into the changeset, all or
// nothing: every path is re-validated, judged by the policy as fs.write
// and checked against what the session's view holds now (STALE_FILE when
// the change was written against other content). It implements
// router.Ingester; the views show the changes from their next refresh.
func (s *Session) Ingest(ctx context.Context, out proposal.Output) error {
	lim := s.o.Limits.withDefaults()
	if len(out.Changes) == 0 {
		return nil
	}
	who := fmt.Sprintf("%s of %s", bound(out.Tool), bound(out.Plugin))
	if len(out.Changes) > lim.MaxFiles {
		return uerr.New(CodeOutputTooLarge, fmt.Sprintf("%s proposed %d file changes in one call", who, len(out.Changes)),
			fmt.Sprintf("a call may propose at most %d", lim.MaxFiles), "change fewer files per call")
	}
	var outRoot *confine.Root
	for _, fc := range out.Changes {
		if !fc.Delete {
			r, err := confine.OpenRoot(out.Dir)
			if err != nil {
				return uerr.Wrap(err, CodeOutputInvalid, "cannot open the output directory of "+who, err.Error(), "this is a kernel or plugin bug; report it")
			}
			defer r.Close()
			outRoot = r
			break
		}
	}
	base := policy.Request{Caller: policy.Caller{Kind: "plugin", Plugin: out.Plugin, PluginKind: "tool"}}
	if s.o.Identify != nil {
		b, err := s.o.Identify(ctx, out.Plugin, out.Tool)
		if err != nil {
			return err
		}
		base = b
	}

	s.ingestMu.Lock()
	defer s.ingestMu.Unlock()
	s.mu.Lock()
	st := &ingestState{s: s, files: make(map[string]overlayEntry, len(s.ov.files)), changes: make(map[string]Change, len(s.changes))}
	for p, e := range s.ov.files {
		st.files[p] = e
	}
	for p, c := range s.changes {
		st.changes[p] = c
	}
	s.mu.Unlock()

	touched := map[string]bool{}
	var total int64
	now := s.o.Now()
	for _, fc := range out.Changes {
		if strings.ContainsFunc(fc.Path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return uerr.New(CodeOutputInvalid, fmt.Sprintf("%s proposed the path %s", who, bound(fc.Path)),
				"project paths cannot contain control characters", "name the file without control characters")
		}
		rel, err := confine.Writable(fc.Path)
		if err != nil {
			return err
		}
		cur, err := st.current(rel)
		if err != nil {
			return err
		}
		if fc.SHA256Before != cur.hash {
			return staleErr(rel, fc.SHA256Before, cur.hash)
		}
		var content []byte
		if fc.Delete {
			if !cur.exists {
				return uerr.New(CodeStale, fmt.Sprintf("%s does not exist in the session's workspace", rel),
					"there is nothing to delete", "read the directory again (fs.list) and delete a file that is there")
			}
		} else {
			if outRoot == nil {
				return uerr.New(CodeOutputInvalid, who+" proposed a change without an output directory", "the call's output directory is unknown", "this is a kernel bug; report it")
			}
			data, err := readArtifact(outRoot, fc.Artifact, who, lim.MaxFileBytes, &total, lim.MaxCallBytes)
			if err != nil {
				return err
			}
			switch fc.Mode {
			case tool.OutputFull:
				content = data
			case tool.OutputPatch:
				old, err := st.read(rel, cur)
				if err != nil {
					return err
				}
				content, err = patch.Apply(old, string(data))
				if errors.Is(err, patch.ErrConflict) {
					return uerr.Wrap(err, CodeStale, fmt.Sprintf("the patch for %s does not apply to the session's current %s", rel, rel),
						err.Error(), "read the file again and redo the edit on its current content")
				}
				if err != nil {
					return uerr.Wrap(err, CodeOutputInvalid, fmt.Sprintf("%s proposed a malformed patch for %s", who, rel), err.Error(), "report this to the plugin's author")
				}
			default:
				return uerr.New(CodeOutputInvalid, fmt.Sprintf("%s proposed %s with output mode %s", who, rel, bound(fc.Mode)),
					`a change is "patch" or "full"`, "report this to the plugin's author")
			}
			if int64(len(content)) > lim.MaxFileBytes {
				return uerr.New(CodeOutputTooLarge, fmt.Sprintf("%s would be %d bytes", rel, len(content)),
					fmt.Sprintf("a file may be at most %d bytes", lim.MaxFileBytes), "split the file")
			}
		}
		after := ""
		if !fc.Delete {
			after = sum(content)
		}
		if fc.SHA256After != "" && fc.SHA256After != after {
			return uerr.New(CodeOutputInvalid, fmt.Sprintf("%s proposed content for %s whose hash is not the one it declared", who, rel),
				fmt.Sprintf("declared %s, the artifact gives %s", short(fc.SHA256After), short(after)), "report this to the plugin's author")
		}
		req := base
		req.Syscall, req.Path, req.Size = "fs.write", rel, int64(len(content))
		res := s.o.Judge.Evaluate(ctx, req)
		var review []string
		switch res.Enforced {
		case policy.Allow:
		case policy.RequireReview:
			review = res.Reasons
			if len(review) == 0 {
				review = []string{"the policy asks for review (rule " + res.DecidingRule() + ")"}
			}
		default:
			return uerr.New(CodeWriteDenied, fmt.Sprintf("writing %s by %s is denied", rel, bound(out.Plugin)),
				strings.Join(res.Reasons, "; ")+" (rule "+res.DecidingRule()+")",
				fmt.Sprintf("write another path; to see why, run `fluffy policy explain --syscall fs.write --path %s --caller %s`", rel, bound(out.Plugin)))
		}
		c, had := st.changes[rel]
		if !had {
			c = Change{Path: rel, Base: cur.hash, Mode: cur.mode}
		}
		if c.Mode == 0 {
			c.Mode = 0o644
		}
		c = c.clone()
		c.Delete, c.Hash, c.Size = fc.Delete, after, int64(len(content))
		c.Plugin, c.Tool, c.CallID, c.Time = out.Plugin, out.Tool, out.CallID, now
		for _, r := range review {
			if !slices.Contains(c.Review, r) {
				c.Review = append(c.Review, r)
			}
		}
		c.History = append(c.History, Proposal{Plugin: out.Plugin, Tool: out.Tool, CallID: out.CallID, Time: now, Before: cur.hash, After: after})
		if !fc.Delete {
			if err := s.writeBlob(c.entry().blobName(), content, c.Mode); err != nil {
				return err
			}
		}
		touched[rel] = true
		if c.Hash == c.Base && (c.Delete || (c.Base != "" && cur.projMode == c.Mode)) {
			// Back to what the project holds: nothing left to merge.
			delete(st.changes, rel)
			delete(st.files, rel)
			continue
		}
		st.changes[rel] = c
		st.files[rel] = c.entry()
	}
	var set []Change
	var del []string
	for p := range touched {
		if c, ok := st.changes[p]; ok {
			set = append(set, c)
		} else {
			del = append(del, p)
		}
	}
	if err := s.persist(set, del); err != nil {
		return err
	}
	s.mu.Lock()
	s.changes = st.changes
	s.ov = overlay{version: s.ov.version + 1, files: st.files}
	s.mu.Unlock()
	s.log.Debug("ingested", "plugin", out.Plugin, "tool", out.Tool, "call", out.CallID, "files", len(touched))
	return nil
}

// ingestState is the changeset as one Ingest builds it.
type ingestState struct {
	s       *Session
	files   map[string]overlayEntry
	changes map[string]Change
}

// content is what the session's view holds at a path.
type content struct {
	exists   bool
	hash     string
	mode     fs.FileMode // of the content (changeset or project); 0 when absent
	projMode fs.FileMode // of the project file; 0 when absent
	blob     string      // the changeset blob holding it, if any
}

// current says what the session holds at rel: the changeset's entry, else
// the project's file. A path the change cannot apply to (a directory, a
// special file, a symbolic link on the way, a parent that is a file) is
// refused.
func (st *ingestState) current(rel string) (content, error) {
	for a := path.Dir(rel); a != "."; a = path.Dir(a) {
		if e, ok := st.files[a]; ok && !e.Delete {
			return content{}, uerr.New(CodeWriteInvalid, fmt.Sprintf("cannot write %s: %s is a file in the session's changes", rel, a),
				"a parent of the path is a file", "delete that file first or choose another path")
		}
	}
	prefix := rel + "/"
	for p, e := range st.files {
		if !e.Delete && strings.HasPrefix(p, prefix) {
			return content{}, uerr.New(CodeWriteInvalid, fmt.Sprintf("cannot write %s: it is a directory in the session's changes", rel),
				"only files are written or deleted", "name a file")
		}
	}
	var proj content
	proj.exists = true
	root := st.s.project
	if err := root.NoLinks(rel); err != nil {
		if ue, ok := uerr.As(err); ok && ue.Code == confine.CodeSymlink {
			return content{}, err
		}
		// A parent that is a file in the project: fine only if the
		// changeset deletes it (checked below by Lstat failing).
		proj.exists = false
	}
	if proj.exists {
		fi, err := root.OS().Lstat(rel)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			proj.exists = false
		case err != nil:
			return content{}, confine.FSError(rel, err)
		case fi.IsDir():
			return content{}, uerr.New(CodeWriteInvalid, fmt.Sprintf("cannot write %s: it is a directory in the project", rel),
				"only files are written or deleted", "name a file inside it")
		case !fi.Mode().IsRegular():
			return content{}, uerr.New(CodeWriteInvalid, fmt.Sprintf("cannot write %s: it is not a regular file in the project", rel),
				"links, devices, sockets and pipes are never changed by tools", "name a regular file")
		default:
			proj.projMode = fi.Mode().Perm()
			proj.mode = proj.projMode
		}
	}
	if !proj.exists {
		// Every existing parent must be a directory, unless the changeset
		// deletes the file in the way.
		for a := path.Dir(rel); a != "."; a = path.Dir(a) {
			fi, err := root.OS().Lstat(a)
			if err != nil {
				continue
			}
			if !fi.IsDir() {
				if e, ok := st.files[a]; ok && e.Delete {
					break
				}
				return content{}, uerr.New(CodeWriteInvalid, fmt.Sprintf("cannot write %s: %s is not a directory in the project", rel, a),
					"a parent of the path is a file or a link", "choose a path whose parents are directories")
			}
		}
	}
	if e, ok := st.files[rel]; ok {
		c := st.changes[rel]
		if e.Delete {
			return content{projMode: proj.projMode}, nil
		}
		return content{exists: true, hash: e.Blob, mode: c.Mode, projMode: proj.projMode, blob: e.blobName()}, nil
	}
	if !proj.exists {
		return content{}, nil
	}
	f, err := root.OS().OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return content{}, confine.FSError(rel, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return content{}, uerr.Wrap(err, CodeIO, "cannot read "+rel, err.Error(), "check the file's permissions")
	}
	proj.hash = hex.EncodeToString(h.Sum(nil))
	return proj, nil
}

// read returns the content cur describes.
func (st *ingestState) read(rel string, cur content) ([]byte, error) {
	if !cur.exists {
		return nil, nil
	}
	var b []byte
	var err error
	if cur.blob != "" {
		b, err = os.ReadFile(filepath.Join(st.s.blobDir(), cur.blob))
	} else {
		b, err = st.s.project.OS().ReadFile(rel)
	}
	if err != nil {
		return nil, uerr.Wrap(err, CodeIO, "cannot read "+rel, err.Error(), "check the file's permissions")
	}
	if sum(b) != cur.hash {
		return nil, staleErr(rel, cur.hash, sum(b))
	}
	return b, nil
}

func staleErr(rel, saw, now string) error {
	return uerr.New(CodeStale, fmt.Sprintf("%s changed since it was read", rel),
		fmt.Sprintf("the change was written against content %s; the session's workspace now has %s", short(saw), short(now)),
		"read the file again and redo the edit on its current content")
}

// readArtifact reads one artifact from the call's output directory: a
// plain relative path to a regular file with one link, reached without
// symbolic links, within the size limits.
func readArtifact(root *confine.Root, name, who string, maxFile int64, total *int64, maxCall int64) ([]byte, error) {
	bad := func(why string) error {
		return uerr.New(CodeOutputInvalid, fmt.Sprintf("%s left artifact %s that the kernel refuses", who, bound(name)), why, "report this to the plugin's author")
	}
	if s := confine.Check(name); s != "" {
		return nil, bad(s)
	}
	rel, err := confine.Clean(name)
	if err != nil || rel == "." {
		return nil, bad("an artifact is a plain path inside the output directory")
	}
	if err := root.NoLinks(rel); err != nil {
		return nil, bad("it is or goes through a symbolic link")
	}
	f, err := root.OS().OpenFile(rel, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, bad(err.Error())
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, bad(err.Error())
	}
	if !fi.Mode().IsRegular() {
		return nil, bad("it is not a regular file")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Nlink != 1 {
		return nil, bad("it has more than one link (a hard link can name a file outside the output directory)")
	}
	if fi.Size() > maxFile {
		return nil, uerr.New(CodeOutputTooLarge, fmt.Sprintf("%s left a %d-byte artifact", who, fi.Size()),
			fmt.Sprintf("one file may be at most %d bytes", maxFile), "change smaller files")
	}
	if *total+fi.Size() > maxCall {
		return nil, uerr.New(CodeOutputTooLarge, fmt.Sprintf("%s left more than %d bytes of artifacts", who, maxCall),
			"the kernel bounds what one call may propose", "change fewer files per call")
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, bad(err.Error())
	}
	if n > maxFile || *total+n > maxCall {
		return nil, uerr.New(CodeOutputTooLarge, fmt.Sprintf("%s left an artifact that grew past the limit while read", who),
			fmt.Sprintf("one file may be at most %d bytes", maxFile), "change smaller files")
	}
	*total += n
	return buf.Bytes(), nil
}

// legacyBlob reads c's blob where sessions kept them before their
// directory was keyed by project ($FLUFFY_HOME/sessions/<id>/blobs) and
// stores it in this session's blob directory. Blobs are named and checked
// by content hash, so one found there is the right content whichever
// project wrote it.
func (s *Session) legacyBlob(c Change) ([]byte, error) {
	name := c.entry().blobName()
	b, err := os.ReadFile(filepath.Join(SessionsDir(s.o.Home), s.id, "blobs", name))
	if err != nil || sum(b) != c.Hash {
		return nil, fmt.Errorf("blob %s is in neither %s nor the old session directory", name, s.blobDir())
	}
	if err := s.writeBlob(name, b, c.Mode); err != nil {
		return nil, err
	}
	return b, nil
}

// writeBlob stores content under name in the blob directory (temp file,
// rename). Blobs are read-only: views hard-link them.
func (s *Session) writeBlob(name string, b []byte, mode fs.FileMode) error {
	dst := filepath.Join(s.blobDir(), name)
	if fi, err := os.Lstat(dst); err == nil && fi.Mode().IsRegular() && fi.Size() == int64(len(b)) {
		// Same name, same size: reuse it only if a crash did not tear it.
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, b) {
			return nil
		}
	}
	perm := fs.FileMode(0o444)
	if mode&0o111 != 0 {
		perm = 0o555
	}
	// No fsync: the changeset record is not synced either (both survive
	// a killed kernel; loadChanges drops an entry whose blob a machine
	// crash lost). Ingest is on every write's path (< 5 ms).
	err := atomicfile.Replace(atomicfile.OS{}, dst, perm, atomicfile.Options{NoSync: true}, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return uerr.Wrap(err, CodeIO, "cannot store a change", err.Error(), "check free disk space under $FLUFFY_HOME")
	}
	return nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func short(h string) string {
	if h == "" {
		return "(none: file absent)"
	}
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// bound quotes untrusted text for an error message: at most 200 bytes,
// control characters escaped.
func bound(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	q := fmt.Sprintf("%q", s)
	return q[1 : len(q)-1]
}

// SavedChanges counts the persisted changeset entries of session id
// without opening the session (`fluffy session list` of a session the
// kernel does not serve).
func SavedChanges(db *store.DB, id string) (int, error) {
	prefix := []byte(store.PrefixChanges + id + "/")
	n := 0
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, uerr.Wrap(err, CodeIO, "cannot read the changeset of session "+id, err.Error(), "run `fluffy audit verify --all` to check the database")
	}
	return n, nil
}

// DropSavedChanges deletes the persisted changeset of session id of
// project (its records and blobs) without opening the session; it returns
// the paths dropped. An open session drops its changes with Discard
// instead.
func DropSavedChanges(db *store.DB, home, project, id string) ([]string, error) {
	prefix := []byte(store.PrefixChanges + id + "/")
	var paths []string
	err := db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		var keys [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			keys = append(keys, k)
			paths = append(paths, string(k[len(prefix):]))
		}
		it.Close()
		for _, k := range keys {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, uerr.Wrap(err, CodeIO, "cannot drop the changeset of session "+id, err.Error(), "check free disk space in the project's .fluffy directory")
	}
	if err := os.RemoveAll(filepath.Join(SessionDir(home, project, id), "blobs")); err != nil {
		return paths, fmt.Errorf("remove the blobs of session %s: %w", id, err)
	}
	return paths, nil
}
