package merge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Error codes.
const (
	CodePlan     = "MERGE_PLAN_FAILED"  // the changeset could not be read or diffed
	CodeApply    = "MERGE_APPLY_FAILED" // a file could not be written; the merge log says which landed
	CodeNotInLog = "MERGE_UNKNOWN_PATH" // an approved path is not in the review
)

// DefaultAutoMaxLines is config merge.auto_max_lines' default.
const DefaultAutoMaxLines = 500

// Recorder appends audit events; *audit.Log implements it.
type Recorder interface {
	Append(ctx context.Context, ev audit.Event) (audit.Record, error)
}

// Sensitive returns the policy's reasons for a person to review writing
// path (nil when none): the kernel asks its policy engine whether fs.write
// of path is require_review.
type Sensitive func(ctx context.Context, path string) []string

// Options are a Merger's dependencies.
type Options struct {
	// DB is the project database holding the merge log (store.PrefixMerge).
	DB *store.DB
	// Audit receives merge_approved and merge_rejected.
	Audit Recorder
	// Sensitive judges paths for the auto-merge criteria; nil = none is.
	Sensitive Sensitive
	// AutoMaxLines is the largest diff (added + removed lines) merged
	// without a person; 0 = DefaultAutoMaxLines.
	AutoMaxLines int
	Logger       hclog.Logger
	Now          func() time.Time

	// afterFile runs after each file of an operation landed; an error
	// stops the apply there, as a killed kernel would (tests).
	afterFile func(op string, path string) error
}

// Merger plans, applies and resumes merges of session changesets into a
// project. It is safe for concurrent use; applies are serialized.
type Merger struct {
	o   Options
	log hclog.Logger
	mu  chanMutex
}

// New returns a Merger.
func New(o Options) (*Merger, error) {
	if o.DB == nil || o.Audit == nil {
		return nil, errors.New("merge: the project database and the audit log are required")
	}
	if o.AutoMaxLines <= 0 {
		o.AutoMaxLines = DefaultAutoMaxLines
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Merger{o: o, log: o.Logger.Named("merge"), mu: make(chanMutex, 1)}, nil
}

// chanMutex is a mutex a context can give up waiting for.
type chanMutex chan struct{}

func (m chanMutex) lock(ctx context.Context) error {
	select {
	case m <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m chanMutex) unlock() { <-m }

// Range is one changed run of lines: Lines new lines from line Start of
// the new file (Start is where they begin, or where removed lines were
// when Lines is 0), replacing Removed old lines. SHA256 is the hash of
// the new lines' exact bytes (the trace).
type Range struct {
	Path    string `json:"path"`
	Start   int    `json:"start"`
	Lines   int    `json:"lines"`
	Removed int    `json:"removed"`
	SHA256  string `json:"sha256"`
}

// FileDiff is one file of a review.
type FileDiff struct {
	Path string
	// Base is the project's hash when the session first changed the file,
	// Current its hash now, New the proposed content's ("" = absent).
	Base, Current, New string
	Create, Delete     bool
	// Mode is the file's mode after merge: the project file's when it
	// exists (preserved), else the change's.
	Mode fs.FileMode
	// Diff is the unified diff from the current project file to the new
	// content; empty when Binary.
	Diff           string
	Added, Removed int
	// Binary is set for content with NUL bytes or too large for a line
	// diff: shown as changed, never auto-merged.
	Binary bool
	// Conflict: the project file changed after the session read it (or
	// is no longer a regular file). A conflict is never written.
	Conflict bool
	// InProject: the project already holds the new content (a merge a
	// killed kernel left and Resume finished, or the user made the same
	// edit). Nothing to write or review; Apply reports it landed.
	InProject bool
	// Sensitive holds the policy's review reasons (from ingest and from
	// Options.Sensitive).
	Sensitive []string
	Ranges    []Range
	// Plugin and CallID name the last proposal; ContentPath holds the new
	// content.
	Plugin, CallID string
	ContentPath    string
}

// Review is a reviewable diff of a changeset.
type Review struct {
	Project string
	Session string
	// Model is the AI model that wrote the changes, for the audit trace;
	// the caller sets it.
	Model string
	// By is who approves or rejects ("user" when empty; "kernel" for an
	// auto-merge), the audit records' caller.
	By    string
	Files []FileDiff
	// Added, Removed and Lines (their sum) count the whole changeset.
	Added, Removed, Lines int
	Conflicts             int
}

// Paths are the review's paths, in order.
func (r *Review) Paths() []string {
	out := make([]string, len(r.Files))
	for i, f := range r.Files {
		out[i] = f.Path
	}
	return out
}

// Text is the whole review as one unified diff (conflicts and binary files
// marked).
func (r *Review) Text() string {
	var b strings.Builder
	for _, f := range r.Files {
		switch {
		case f.InProject:
			fmt.Fprintf(&b, "# %s: the project already has this change\n", f.Path)
			continue
		case f.Conflict:
			fmt.Fprintf(&b, "# CONFLICT %s: changed in the project since the session read it; it will not be overwritten\n", f.Path)
		case f.Delete:
			fmt.Fprintf(&b, "# delete %s\n", f.Path)
		case f.Create:
			fmt.Fprintf(&b, "# new file %s (mode %04o)\n", f.Path, f.Mode)
		}
		if f.Binary {
			fmt.Fprintf(&b, "Binary files a/%s and b/%s differ\n", f.Path, f.Path)
			continue
		}
		b.WriteString(f.Diff)
	}
	fmt.Fprintf(&b, "# %d files, +%d -%d lines, %d conflicts\n", len(r.Files), r.Added, r.Removed, r.Conflicts)
	return b.String()
}

// Plan builds the review of changes (workspace.Session.Changes) against
// the project as it is now.
func (m *Merger) Plan(ctx context.Context, project string, changes []workspace.Change) (*Review, error) {
	root, err := confine.OpenRoot(project)
	if err != nil {
		return nil, uerr.Wrap(err, CodePlan, "cannot open the project "+project, err.Error(), "check that the project directory exists")
	}
	defer root.Close()
	r := &Review{Project: project}
	deleting := map[string]bool{}
	for _, c := range changes {
		if c.Delete {
			deleting[c.Path] = true
		}
	}
	for _, c := range changes {
		if r.Session == "" {
			r.Session = c.Session
		}
		rel, err := confine.Writable(c.Path)
		if err != nil {
			return nil, err
		}
		cur, curB, err := current(root, rel)
		if err != nil {
			return nil, err
		}
		if cur.odd && cur.hash == "("+confine.CodeInvalid+")" && underDeleted(rel, deleting) {
			// A parent is a project file this changeset deletes first
			// (Apply goes in path order: "a" before "a/b").
			cur, curB = state{}, nil
		}
		var newB []byte
		if !c.Delete {
			if newB, err = os.ReadFile(c.ContentPath); err != nil {
				return nil, uerr.Wrap(err, CodePlan, "cannot read the proposed content of "+rel, err.Error(), "the session's data is incomplete; discard the change")
			}
			if hash(newB) != c.Hash {
				return nil, uerr.New(CodePlan, "the proposed content of "+rel+" was changed on disk",
					fmt.Sprintf("it should hash to %s, it hashes to %s", c.Hash, hash(newB)), "discard the change and redo it")
			}
		}
		f := FileDiff{Path: rel, Base: c.Base, Current: cur.hash, New: c.Hash, Create: !cur.exists && !c.Delete, Delete: c.Delete,
			Mode: c.Mode, Conflict: cur.hash != c.Base || cur.odd, Plugin: c.Plugin, CallID: c.CallID, ContentPath: c.ContentPath}
		if cur.exists && !cur.odd {
			f.Mode = cur.mode
		}
		if (c.Delete && !cur.exists) || (!c.Delete && cur.exists && !cur.odd && cur.hash == c.Hash) {
			f.InProject, f.Conflict, f.Create = true, false, false
			r.Files = append(r.Files, f)
			continue
		}
		f.Sensitive = append(f.Sensitive, c.Review...)
		if m.o.Sensitive != nil {
			for _, s := range m.o.Sensitive(ctx, rel) {
				if !contains(f.Sensitive, s) {
					f.Sensitive = append(f.Sensitive, s)
				}
			}
		}
		if bytes.IndexByte(curB, 0) >= 0 || bytes.IndexByte(newB, 0) >= 0 {
			f.Binary = true
		} else if d, err := patch.Unified(rel, curB, newB); err != nil {
			f.Binary = true
		} else {
			f.Diff = d
		}
		if f.Binary {
			f.Added, f.Removed = countLines(newB), countLines(curB)
			f.Ranges = []Range{{Path: rel, Start: 1, Lines: f.Added, Removed: f.Removed, SHA256: hash(newB)}}
		} else {
			f.Added, f.Removed, f.Ranges = ranges(rel, f.Diff)
		}
		r.Files = append(r.Files, f)
		r.Added += f.Added
		r.Removed += f.Removed
		if f.Conflict {
			r.Conflicts++
		}
	}
	r.Lines = r.Added + r.Removed
	return r, nil
}

// Decision says whether a review may merge without a person.
type Decision struct {
	Auto    bool
	Reasons []string // why not, when !Auto
}

// Auto applies the auto-merge criteria: the caller's test run is
// green, no path is sensitive by policy, no conflict, no binary file, and
// the diff is at most AutoMaxLines lines.
func (m *Merger) Auto(r *Review, testsGreen bool) Decision {
	var why []string
	if len(r.Files) == 0 {
		why = append(why, "there is nothing to merge")
	}
	if !testsGreen {
		why = append(why, "the tests are not all passing")
	}
	if r.Lines > m.o.AutoMaxLines {
		why = append(why, fmt.Sprintf("the diff has %d lines, more than merge.auto_max_lines (%d)", r.Lines, m.o.AutoMaxLines))
	}
	for _, f := range r.Files {
		switch {
		case f.InProject:
		case f.Conflict:
			why = append(why, f.Path+" changed in the project since the session read it")
		case f.Binary:
			why = append(why, f.Path+" is binary or too large for a line diff")
		case len(f.Sensitive) > 0:
			why = append(why, f.Path+" is sensitive: "+strings.Join(f.Sensitive, "; "))
		}
	}
	return Decision{Auto: len(why) == 0, Reasons: why}
}

type state struct {
	exists bool
	odd    bool // exists but is not a regular file (directory, link, device)
	hash   string
	mode   fs.FileMode
}

// current reads the project's file at rel without following a link.
func current(root *confine.Root, rel string) (state, []byte, error) {
	if err := root.NoLinks(rel); err != nil {
		if ue, ok := uerr.As(err); ok && (ue.Code == confine.CodeSymlink || ue.Code == confine.CodeInvalid) {
			return state{exists: true, odd: true, hash: "(" + ue.Code + ")"}, nil, nil
		}
		return state{}, nil, err
	}
	fi, err := root.OS().Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return state{}, nil, nil
	}
	if err != nil {
		return state{}, nil, confine.FSError(rel, err)
	}
	if !fi.Mode().IsRegular() {
		return state{exists: true, odd: true, hash: "(" + fi.Mode().Type().String() + ")"}, nil, nil
	}
	b, err := root.OS().ReadFile(rel)
	if err != nil {
		return state{}, nil, confine.FSError(rel, err)
	}
	return state{exists: true, hash: hash(b), mode: fi.Mode().Perm()}, b, nil
}

// ranges counts a unified diff's lines and splits it into changed runs.
func ranges(path, diff string) (added, removed int, out []Range) {
	var cur *Range
	var buf bytes.Buffer
	flush := func() {
		if cur != nil {
			cur.SHA256 = hash(buf.Bytes())
			out = append(out, *cur)
			cur, buf = nil, bytes.Buffer{}
		}
	}
	newLine := 0
	var prev byte
	lines := strings.Split(diff, "\n")
	inHunks := false
	for _, l := range lines {
		if strings.HasPrefix(l, "@@ ") {
			flush()
			inHunks = true
			newLine = hunkNewStart(l)
			prev = 0
			continue
		}
		if !inHunks || l == "" {
			continue
		}
		switch l[0] {
		case ' ':
			flush()
			newLine++
		case '-':
			if cur == nil {
				cur = &Range{Path: path, Start: newLine}
			}
			cur.Removed++
			removed++
		case '+':
			if cur == nil {
				cur = &Range{Path: path, Start: newLine}
			}
			cur.Lines++
			added++
			newLine++
			buf.WriteString(l[1:])
			buf.WriteByte('\n')
		case '\\':
			if prev == '+' && buf.Len() > 0 {
				buf.Truncate(buf.Len() - 1)
			}
		}
		prev = l[0]
	}
	flush()
	return added, removed, out
}

// hunkNewStart is the first new-file line a hunk header's "+c,d" names
// (for an empty new side, the line after c).
func hunkNewStart(h string) int {
	for _, f := range strings.Fields(h) {
		if !strings.HasPrefix(f, "+") {
			continue
		}
		f = f[1:]
		cnt := 1
		if i := strings.IndexByte(f, ','); i >= 0 {
			cnt, _ = strconv.Atoi(f[i+1:])
			f = f[:i]
		}
		n, _ := strconv.Atoi(f)
		if cnt == 0 {
			n++
		}
		return n
	}
	return 1
}

// underDeleted reports whether a parent of rel is in deleting.
func underDeleted(rel string, deleting map[string]bool) bool {
	for i := len(rel) - 1; i > 0; i-- {
		if rel[i] == '/' && deleting[rel[:i]] {
			return true
		}
	}
	return false
}

func countLines(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	n := bytes.Count(b, []byte{'\n'})
	if b[len(b)-1] != '\n' {
		n++
	}
	return n
}

func hash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
