package commit

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// repo is the project's repository as the kernel reads it.
type repo struct {
	project string
	gitDir  string // HEAD, index, logs/HEAD
	common  string // objects, refs, logs/refs
	r       *git.Repository
	branch  plumbing.ReferenceName
	head    plumbing.Hash // zero on an unborn branch
}

// open reads the project's repository and its HEAD; nil without error when
// the project root has no .git.
func open(project string) (*repo, error) {
	gitDir, common, err := gitDirs(project)
	if err != nil || gitDir == "" {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(common, "config")); err == nil && bytes.Contains(bytes.ToLower(b), []byte("objectformat")) && bytes.Contains(bytes.ToLower(b), []byte("sha256")) {
		return nil, uerr.New(CodeUnsupported, "the repository uses SHA-256 object names", "fluffy commits to SHA-1 repositories only", "commit the merged files with git yourself")
	}
	r, err := git.PlainOpenWithOptions(project, &git.PlainOpenOptions{DetectDotGit: false, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, repoErr("open the repository", err)
	}
	st := &repo{project: project, gitDir: gitDir, common: common, r: r}
	if err := st.readHead(); err != nil {
		return nil, err
	}
	return st, nil
}

// gitDirs finds the repository of the project root: a .git directory, or a
// .git file pointing at a linked worktree's directory (with commondir).
func gitDirs(project string) (gitDir, common string, err error) {
	dot := filepath.Join(project, ".git")
	fi, err := os.Stat(dot)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", repoErr("look at .git", err)
	}
	if fi.IsDir() {
		return dot, dot, nil
	}
	b, err := os.ReadFile(dot)
	if err != nil {
		return "", "", repoErr("read .git", err)
	}
	line := strings.TrimSpace(string(b))
	if !strings.HasPrefix(line, "gitdir:") {
		return "", "", uerr.New(CodeUnsupported, ".git is a file that does not name a git directory", "it has no gitdir: line", "repair the worktree with `git worktree repair`")
	}
	gitDir = strings.TrimSpace(strings.TrimPrefix(line, "gitdir:"))
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(project, gitDir)
	}
	common = gitDir
	if c, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		common = strings.TrimSpace(string(c))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	}
	return filepath.Clean(gitDir), filepath.Clean(common), nil
}

func (st *repo) readHead() error {
	h, err := st.r.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return repoErr("read HEAD", err)
	}
	if h.Type() != plumbing.SymbolicReference || !h.Target().IsBranch() {
		at := h.Target().String()
		if h.Type() != plumbing.SymbolicReference {
			at = h.Hash().String()
		}
		return uerr.New(CodeDetached, "HEAD is detached (at "+at+"): merge done, commit skipped",
			"fluffy commits only on top of a local branch, and HEAD does not point at one",
			"check out a branch (`git switch <branch>`), then commit the merged files with git")
	}
	st.branch = h.Target()
	ref, err := st.r.Storer.Reference(st.branch)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		st.head = plumbing.ZeroHash
	case err != nil:
		return repoErr("read "+st.branch.String(), err)
	default:
		st.head = ref.Hash()
	}
	return nil
}

// obj is one git object: its type and content (without the header).
type obj struct {
	typ  plumbing.ObjectType
	data []byte
}

func hashOf(t plumbing.ObjectType, data []byte) plumbing.Hash {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", t, len(data))
	h.Write(data)
	var out plumbing.Hash
	copy(out[:], h.Sum(nil))
	return out
}

// expectation is what a correct commit of a request adds.
type expectation struct {
	objs  map[plumbing.Hash]obj
	root  plumbing.Hash
	paths []string                     // cleaned, sorted
	files map[string]*File             // by cleaned path
	blobs map[string]plumbing.Hash     // cleaned path → blob (not for deletions)
	modes map[string]filemode.FileMode // cleaned path → mode in the new tree
	order []plumbing.Hash              // blobs, then trees bottom-up
}

// expected recomputes, from HEAD and the request alone, the objects of the
// commit's tree.
func (st *repo) expected(req Request) (*expectation, error) {
	if len(req.Files) == 0 {
		return nil, uerr.New(CodeBadRequest, "nothing to commit", "the request names no merged files", "commit after a merge that changed files")
	}
	if len(req.Files) > MaxFiles {
		return nil, uerr.New(CodeBadRequest, fmt.Sprintf("%d files in one commit", len(req.Files)), fmt.Sprintf("the limit is %d", MaxFiles), "commit in parts")
	}
	if strings.TrimSpace(req.Message) == "" || strings.TrimSpace(req.AuthorName) == "" || strings.TrimSpace(req.AuthorEmail) == "" ||
		strings.ContainsAny(req.AuthorName+req.AuthorEmail, "<>\n\x00") {
		return nil, uerr.New(CodeBadRequest, "a commit needs a message and a plain author name and email", "one is empty or holds <, >, NUL or a newline", "set the commit author in the config")
	}
	e := &expectation{objs: map[plumbing.Hash]obj{}, files: map[string]*File{}, blobs: map[string]plumbing.Hash{}, modes: map[string]filemode.FileMode{}}
	for i := range req.Files {
		f := &req.Files[i]
		c, err := confine.Clean(f.Path)
		if err != nil {
			return nil, err
		}
		if c == "." || confine.HasGitDir(c) || confine.InKernelDir(c) {
			return nil, uerr.New(CodeBadRequest, fmt.Sprintf("%q cannot be committed", bounded(f.Path)), "it is the root, inside .git or inside .fluffy", "commit project files only")
		}
		if len(f.Content) > MaxFileBytes {
			return nil, uerr.New(CodeBadRequest, fmt.Sprintf("%s is %d bytes", c, len(f.Content)), fmt.Sprintf("fluffy commits files up to %d bytes", MaxFileBytes), "commit it with git yourself")
		}
		if _, dup := e.files[c]; dup {
			return nil, uerr.New(CodeBadRequest, fmt.Sprintf("%s is listed twice", c), "each merged path appears once", "deduplicate the merged files")
		}
		e.files[c] = f
		e.paths = append(e.paths, c)
	}
	sort.Strings(e.paths)
	if err := st.checkFilters(e.paths); err != nil {
		return nil, err
	}
	var base *object.Tree
	if !st.head.IsZero() {
		c, err := st.r.CommitObject(st.head)
		if err != nil {
			return nil, repoErr("read HEAD's commit", err)
		}
		if base, err = c.Tree(); err != nil {
			return nil, repoErr("read HEAD's tree", err)
		}
	}
	changes := map[string]*File{}
	for p, f := range e.files {
		changes[p] = f
	}
	root, err := st.tree(e, base, "", changes)
	if err != nil {
		return nil, err
	}
	e.root = root
	return e, nil
}

type entry struct {
	name string
	mode filemode.FileMode
	hash plumbing.Hash
}

func (e *expectation) add(t plumbing.ObjectType, data []byte) plumbing.Hash {
	h := hashOf(t, data)
	if _, ok := e.objs[h]; !ok {
		e.objs[h] = obj{t, data}
		e.order = append(e.order, h)
	}
	return h
}

// tree computes base (nil: empty) with changes (paths relative to dir)
// applied; the zero hash for an empty subdirectory. The root is written
// even when empty.
func (st *repo) tree(e *expectation, base *object.Tree, dir string, changes map[string]*File) (plumbing.Hash, error) {
	entries := map[string]entry{}
	if base != nil {
		for _, te := range base.Entries {
			entries[te.Name] = entry{te.Name, te.Mode, te.Hash}
		}
	}
	join := func(name string) string {
		if dir == "" {
			return name
		}
		return dir + "/" + name
	}
	sub := map[string]map[string]*File{}
	for p, f := range changes {
		name, rest, nested := strings.Cut(p, "/")
		if nested {
			if sub[name] == nil {
				sub[name] = map[string]*File{}
			}
			sub[name][rest] = f
			continue
		}
		full := join(name)
		old, had := entries[name]
		if had && old.mode != filemode.Regular && old.mode != filemode.Executable && old.mode != filemode.Deprecated {
			return plumbing.ZeroHash, uerr.New(CodeBadRequest, fmt.Sprintf("%s is not a regular file in HEAD", full), "fluffy commits regular files only", "commit that path with git yourself")
		}
		if f.Delete {
			delete(entries, name)
			continue
		}
		h := e.add(plumbing.BlobObject, f.Content)
		mode := filemode.Regular
		switch {
		case had && old.mode == filemode.Executable:
			mode = filemode.Executable
		case !had:
			if fi, err := os.Lstat(filepath.Join(st.project, filepath.FromSlash(full))); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o100 != 0 {
				mode = filemode.Executable
			}
		}
		entries[name] = entry{name, mode, h}
		e.blobs[full], e.modes[full] = h, mode
	}
	names := make([]string, 0, len(sub))
	for n := range sub {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		var sb *object.Tree
		if old, had := entries[name]; had {
			if old.mode != filemode.Dir {
				return plumbing.ZeroHash, uerr.New(CodeBadRequest, fmt.Sprintf("%s is not a directory in HEAD", join(name)), "a merged path cannot go through a file", "commit that change with git yourself")
			}
			t, err := st.r.TreeObject(old.hash)
			if err != nil {
				return plumbing.ZeroHash, repoErr("read tree "+join(name), err)
			}
			sb = t
		}
		h, err := st.tree(e, sb, join(name), sub[name])
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if h.IsZero() {
			delete(entries, name)
		} else {
			entries[name] = entry{name, filemode.Dir, h}
		}
	}
	if len(entries) == 0 && dir != "" {
		return plumbing.ZeroHash, nil
	}
	list := make([]entry, 0, len(entries))
	for _, en := range entries {
		list = append(list, en)
	}
	key := func(en entry) string {
		if en.mode == filemode.Dir {
			return en.name + "/"
		}
		return en.name
	}
	sort.Slice(list, func(i, j int) bool { return key(list[i]) < key(list[j]) })
	var buf bytes.Buffer
	for _, en := range list {
		fmt.Fprintf(&buf, "%o %s\x00", uint32(en.mode), en.name)
		buf.Write(en.hash[:])
	}
	return e.add(plumbing.TreeObject, buf.Bytes()), nil
}

// normMessage is the message as committed: exactly one final newline.
func normMessage(m string) string { return strings.TrimRight(m, "\n") + "\n" }
