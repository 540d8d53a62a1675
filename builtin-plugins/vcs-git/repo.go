package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// Error codes this plugin returns.
const (
	CodeNotRepo      = "VCS_NOT_A_REPOSITORY"
	CodeDetached     = "VCS_DETACHED_HEAD"
	CodeBadPath      = "VCS_BAD_PATH"
	CodeNotConfigure = "VCS_NOT_CONFIGURED"
	CodeGit          = "VCS_GIT_ERROR"
	CodeNoPaths      = "VCS_NOTHING_TO_COMMIT"
	CodeBadRequest   = "VCS_BAD_REQUEST"
)

const (
	defaultLogLimit = 20
	maxLogLimit     = 1000
	maxDiffBytes    = 1 << 20 // unified diff text returned by Diff
	maxFileBytes    = 64 << 20
	maxCommitPaths  = 10000
)

type gitVCS struct {
	log hclog.Logger

	mu  sync.Mutex
	cfg base.Config
}

func newGitVCS(logger hclog.Logger) *gitVCS { return &gitVCS{log: logger} }

func (g *gitVCS) Info() base.Info {
	return base.Info{Name: "vcs-git", Kind: base.KindVCS, Version: version, APIVersions: []int{1, 2}}
}

func (g *gitVCS) Configure(_ context.Context, cfg base.Config, _ base.KernelClient) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cfg = cfg
	return nil
}

func (g *gitVCS) Health(context.Context) error { return nil }

func (g *gitVCS) config() (base.Config, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cfg.Workspace == "" {
		return g.cfg, uerr.New(CodeNotConfigure, "vcs-git has no workspace", "the kernel did not configure it with one", "run it through fluffy")
	}
	return g.cfg, nil
}

// open opens the repository at the workspace root (never a parent: the
// workspace is the project).
func (g *gitVCS) open() (*git.Repository, base.Config, error) {
	cfg, err := g.config()
	if err != nil {
		return nil, cfg, err
	}
	r, err := git.PlainOpenWithOptions(cfg.Workspace, &git.PlainOpenOptions{DetectDotGit: false, EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, cfg, uerr.New(CodeNotRepo, "the project is not a git repository", "there is no .git at the project root", "run `git init` in the project to get commits; merging works without one")
	}
	if err != nil {
		return nil, cfg, gitErr("open the repository", err)
	}
	return r, cfg, nil
}

func gitErr(what string, err error) error {
	return uerr.Wrap(err, CodeGit, "could not "+what, err.Error(), "check the repository with `git fsck`")
}

// head is the current branch and its commit (zero for an unborn branch).
type head struct {
	branch plumbing.ReferenceName
	hash   plumbing.Hash
}

func currentHead(r *git.Repository) (head, error) {
	h, err := r.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return head{}, gitErr("read HEAD", err)
	}
	if h.Type() != plumbing.SymbolicReference {
		return head{}, uerr.New(CodeDetached, "HEAD is detached (at "+h.Hash().String()[:12]+")",
			"fluffy commits only on top of a branch, and HEAD points at a commit, not a branch",
			"check out a branch (`git switch <branch>`) and merge again")
	}
	hd := head{branch: h.Target()}
	if !hd.branch.IsBranch() {
		return head{}, uerr.New(CodeDetached, "HEAD points at "+hd.branch.String()+", not a branch", "fluffy commits only on top of a local branch", "check out a branch (`git switch <branch>`)")
	}
	ref, err := r.Storer.Reference(hd.branch)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		return hd, nil // unborn
	case err != nil:
		return head{}, gitErr("read "+hd.branch.String(), err)
	}
	hd.hash = ref.Hash()
	return hd, nil
}

func (g *gitVCS) Status(_ context.Context) (vcs.Status, error) {
	r, _, err := g.open()
	if err != nil {
		return vcs.Status{}, err
	}
	hd, err := currentHead(r)
	if err != nil {
		return vcs.Status{}, err
	}
	st := vcs.Status{Branch: hd.branch.Short()}
	if !hd.hash.IsZero() {
		st.Head = hd.hash.String()
	}
	wt, err := r.Worktree()
	if err != nil {
		return vcs.Status{}, gitErr("open the working tree", err)
	}
	s, err := wt.Status()
	if err != nil {
		return vcs.Status{}, gitErr("compute the status", err)
	}
	for p, fs := range s {
		if fs.Staging == git.Unmodified && fs.Worktree == git.Unmodified {
			continue
		}
		st.Files = append(st.Files, vcs.FileStatus{Path: p, Status: string([]byte{byte(fs.Staging), byte(fs.Worktree)})})
	}
	sort.Slice(st.Files, func(i, j int) bool { return st.Files[i].Path < st.Files[j].Path })
	return st, nil
}

// Diff is `git diff` (index → working tree) or, staged, `git diff --cached`
// (HEAD → index), limited to paths (files or directories) when given.
func (g *gitVCS) Diff(_ context.Context, paths []string, staged bool) (string, error) {
	r, cfg, err := g.open()
	if err != nil {
		return "", err
	}
	var filters []string
	for _, p := range paths {
		c, err := cleanPath(p)
		if err != nil {
			return "", err
		}
		filters = append(filters, c)
	}
	wt, err := r.Worktree()
	if err != nil {
		return "", gitErr("open the working tree", err)
	}
	s, err := wt.Status()
	if err != nil {
		return "", gitErr("compute the status", err)
	}
	idx, err := r.Storer.Index()
	if err != nil {
		return "", gitErr("read the index", err)
	}
	hd, err := currentHead(r)
	if err != nil {
		return "", err
	}
	var headTree *object.Tree
	if !hd.hash.IsZero() {
		c, err := r.CommitObject(hd.hash)
		if err != nil {
			return "", gitErr("read HEAD", err)
		}
		if headTree, err = c.Tree(); err != nil {
			return "", gitErr("read HEAD's tree", err)
		}
	}
	var names []string
	for p, fs := range s {
		code := fs.Worktree
		if staged {
			code = fs.Staging
		}
		if code == git.Unmodified || code == git.Untracked || !matches(p, filters) {
			continue
		}
		names = append(names, p)
	}
	sort.Strings(names)
	blob := func(h plumbing.Hash) ([]byte, error) {
		b, err := r.BlobObject(h)
		if err != nil {
			return nil, err
		}
		rd, err := b.Reader()
		if err != nil {
			return nil, err
		}
		defer rd.Close()
		return io.ReadAll(io.LimitReader(rd, maxFileBytes))
	}
	var out strings.Builder
	for _, p := range names {
		var old, cur []byte
		if staged {
			if headTree != nil {
				if f, err := headTree.File(p); err == nil {
					old, _ = blob(f.Hash)
				}
			}
			if e, err := idx.Entry(p); err == nil {
				cur, _ = blob(e.Hash)
			}
		} else {
			if e, err := idx.Entry(p); err == nil {
				old, _ = blob(e.Hash)
			}
			cur, _ = readLimited(filepath.Join(cfg.Workspace, filepath.FromSlash(p)))
		}
		d, err := patch.Unified(p, old, cur)
		if errors.Is(err, patch.ErrTooLarge) {
			d = fmt.Sprintf("--- a/%s\n+++ b/%s\n(file too large for a line diff)\n", p, p)
		} else if err != nil {
			return "", gitErr("diff "+p, err)
		}
		if out.Len()+len(d) > maxDiffBytes {
			out.WriteString("(diff truncated)\n")
			break
		}
		out.WriteString(d)
	}
	return out.String(), nil
}

func readLimited(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFileBytes))
}

func matches(p string, filters []string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if f == "." || p == f || strings.HasPrefix(p, f+"/") {
			return true
		}
	}
	return false
}

func (g *gitVCS) Log(_ context.Context, limit int) ([]vcs.LogEntry, error) {
	r, _, err := g.open()
	if err != nil {
		return nil, err
	}
	hd, err := currentHead(r)
	if err != nil {
		return nil, err
	}
	if hd.hash.IsZero() {
		return nil, nil
	}
	if limit <= 0 {
		limit = defaultLogLimit
	}
	limit = min(limit, maxLogLimit)
	it, err := r.Log(&git.LogOptions{From: hd.hash})
	if err != nil {
		return nil, gitErr("read the log", err)
	}
	defer it.Close()
	var out []vcs.LogEntry
	for len(out) < limit {
		c, err := it.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, gitErr("read the log", err)
		}
		out = append(out, vcs.LogEntry{Commit: c.Hash.String(), Author: c.Author.Name + " <" + c.Author.Email + ">", Message: c.Message, UnixTime: c.Author.When.Unix()})
	}
	return out, nil
}

// cleanPath validates a repository-relative path from a request.
func cleanPath(p string) (string, error) {
	bad := func(why string) error {
		return uerr.New(CodeBadPath, fmt.Sprintf("path %q cannot be used", p), why, "pass a slash-separated path relative to the project root")
	}
	if p == "" || strings.ContainsAny(p, "\x00\\") {
		return "", bad("it is empty or contains NUL or a backslash")
	}
	if path.IsAbs(p) {
		return "", bad("it is absolute")
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", bad("it leaves the project")
	}
	for _, seg := range strings.Split(c, "/") {
		if strings.EqualFold(seg, ".git") {
			return "", bad("it is inside a .git directory")
		}
	}
	return c, nil
}
