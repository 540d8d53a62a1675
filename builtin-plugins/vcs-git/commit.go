package main

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
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/vcs"
)

// change is what the commit does to one path.
type change struct {
	content []byte
	del     bool
	exec    bool // the working tree file has its owner execute bit
}

// builder collects the objects a commit adds.
type builder struct {
	repo *git.Repository
	mem  *memory.Storage
	now  []plumbing.Hash // new objects, in creation order
}

func (b *builder) put(t plumbing.ObjectType, content []byte) (plumbing.Hash, error) {
	o := b.mem.NewEncodedObject()
	o.SetType(t)
	o.SetSize(int64(len(content)))
	w, err := o.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := w.Write(content); err != nil {
		return plumbing.ZeroHash, err
	}
	_ = w.Close()
	h := o.Hash()
	if b.repo.Storer.HasEncodedObject(h) == nil {
		return h, nil // the repository has it already
	}
	if _, err := b.mem.EncodedObject(plumbing.AnyObject, h); err == nil {
		return h, nil
	}
	if _, err := b.mem.SetEncodedObject(o); err != nil {
		return plumbing.ZeroHash, err
	}
	b.now = append(b.now, h)
	return h, nil
}

// tree writes base with changes (paths relative to it) applied and returns
// its hash, or zero when the result is empty.
func (b *builder) tree(base *object.Tree, dir string, changes map[string]*change) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	if base != nil {
		for _, e := range base.Entries {
			entries[e.Name] = e
		}
	}
	sub := map[string]map[string]*change{}
	for p, c := range changes {
		name, rest, nested := strings.Cut(p, "/")
		if nested {
			if sub[name] == nil {
				sub[name] = map[string]*change{}
			}
			sub[name][rest] = c
			continue
		}
		full := joinPath(dir, name)
		old, had := entries[name]
		if had && old.Mode != filemode.Regular && old.Mode != filemode.Executable && old.Mode != filemode.Deprecated {
			return plumbing.ZeroHash, uerr.New(CodeBadPath, fmt.Sprintf("%s is a %s in HEAD, not a file", full, modeName(old.Mode)),
				"only regular files are committed", "commit that path with git yourself")
		}
		if c.del {
			delete(entries, name)
			continue
		}
		h, err := b.put(plumbing.BlobObject, c.content)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		mode := filemode.Regular
		if had && old.Mode == filemode.Executable || !had && c.exec {
			mode = filemode.Executable
		}
		entries[name] = object.TreeEntry{Name: name, Mode: mode, Hash: h}
	}
	for name, cs := range sub {
		var st *object.Tree
		if old, had := entries[name]; had {
			if old.Mode != filemode.Dir {
				return plumbing.ZeroHash, uerr.New(CodeBadPath, fmt.Sprintf("%s is a %s in HEAD, not a directory", joinPath(dir, name), modeName(old.Mode)),
					"a committed path cannot go through a file", "commit that change with git yourself")
			}
			t, err := b.repo.TreeObject(old.Hash)
			if err != nil {
				return plumbing.ZeroHash, gitErr("read tree "+joinPath(dir, name), err)
			}
			st = t
		}
		h, err := b.tree(st, joinPath(dir, name), cs)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if h.IsZero() {
			delete(entries, name)
		} else {
			entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
		}
	}
	if len(entries) == 0 && dir != "" {
		return plumbing.ZeroHash, nil
	}
	t := &object.Tree{}
	for _, e := range entries {
		t.Entries = append(t.Entries, e)
	}
	// git's order: names compared as if directories ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(t.Entries, func(i, j int) bool { return key(t.Entries[i]) < key(t.Entries[j]) })
	o := b.mem.NewEncodedObject()
	if err := t.Encode(o); err != nil {
		return plumbing.ZeroHash, err
	}
	rd, err := o.Reader()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer rd.Close()
	content, err := io.ReadAll(rd)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return b.put(plumbing.TreeObject, content)
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func modeName(m filemode.FileMode) string {
	switch m {
	case filemode.Dir:
		return "directory"
	case filemode.Symlink:
		return "symbolic link"
	case filemode.Submodule:
		return "submodule"
	}
	return "file of mode " + m.String()
}

// Commit builds the commit of req.Paths on top of HEAD and writes it under
// <out>/commits/<id>/; it returns the commit id.
func (g *gitVCS) Commit(ctx context.Context, req vcs.CommitRequest) (string, error) {
	r, cfg, err := g.open()
	if err != nil {
		return "", err
	}
	if cfg.OutDir == "" {
		return "", uerr.New(CodeNotConfigure, "vcs-git has no output directory", "the kernel did not configure one", "run it through fluffy")
	}
	if len(req.Paths) == 0 {
		return "", uerr.New(CodeNoPaths, "no paths to commit", "vcs-git commits exactly the paths it is given", "pass the merged paths")
	}
	if len(req.Paths) > maxCommitPaths {
		return "", uerr.New(CodeBadRequest, fmt.Sprintf("%d paths in one commit", len(req.Paths)), fmt.Sprintf("the limit is %d", maxCommitPaths), "commit in smaller parts")
	}
	if strings.TrimSpace(req.Message) == "" || strings.TrimSpace(req.AuthorName) == "" || strings.TrimSpace(req.AuthorEmail) == "" {
		return "", uerr.New(CodeBadRequest, "a commit needs a message, an author name and an author email", "one of them is empty", "fill in message, author_name and author_email")
	}
	if strings.ContainsAny(req.AuthorName+req.AuthorEmail, "<>\n\x00") {
		return "", uerr.New(CodeBadRequest, "the author name or email contains <, >, NUL or a newline", "git's signature format cannot hold them", "send a plain name and address")
	}
	hd, err := currentHead(r)
	if err != nil {
		return "", err
	}
	var base *object.Tree
	var parents []plumbing.Hash
	if !hd.hash.IsZero() {
		c, err := r.CommitObject(hd.hash)
		if err != nil {
			return "", gitErr("read HEAD", err)
		}
		if base, err = c.Tree(); err != nil {
			return "", gitErr("read HEAD's tree", err)
		}
		parents = []plumbing.Hash{hd.hash}
	}
	changes := map[string]*change{}
	var paths []string
	for _, p := range req.Paths {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		c, err := cleanPath(p)
		if err != nil {
			return "", err
		}
		if c == "." {
			return "", uerr.New(CodeBadPath, "cannot commit the project root as a path", "paths name files", "pass file paths")
		}
		if _, dup := changes[c]; dup {
			continue
		}
		ch, err := readChange(cfg.Workspace, c)
		if err != nil {
			return "", err
		}
		changes[c] = ch
		paths = append(paths, c)
	}
	sort.Strings(paths)
	b := &builder{repo: r, mem: memory.NewStorage()}
	root, err := b.tree(base, "", changes)
	if err != nil {
		return "", err
	}
	sig := object.Signature{Name: req.AuthorName, Email: req.AuthorEmail, When: time.Now().Truncate(time.Second)}
	cm := &object.Commit{Author: sig, Committer: sig, Message: strings.TrimRight(req.Message, "\n") + "\n", TreeHash: root, ParentHashes: parents}
	o := b.mem.NewEncodedObject()
	if err := cm.Encode(o); err != nil {
		return "", gitErr("encode the commit", err)
	}
	rd, err := o.Reader()
	if err != nil {
		return "", err
	}
	content, err := io.ReadAll(rd)
	rd.Close()
	if err != nil {
		return "", err
	}
	id, err := b.put(plumbing.CommitObject, content)
	if err != nil {
		return "", err
	}
	out := vcs.CommitOutput{Commit: id.String(), Branch: hd.branch.String(), Paths: paths}
	if !hd.hash.IsZero() {
		out.Parent = hd.hash.String()
	}
	if err := b.write(filepath.Join(cfg.OutDir, vcs.CommitDir), out); err != nil {
		return "", uerr.Wrap(err, CodeGit, "could not write the commit to the output directory", err.Error(), "check the output directory's space and permissions")
	}
	g.log.Info("commit built", "commit", id.String(), "parent", out.Parent, "paths", len(paths), "objects", len(b.now))
	return id.String(), nil
}

// readChange reads one path of the working tree: its content, or a
// deletion when it does not exist.
func readChange(ws, rel string) (*change, error) {
	full := filepath.Join(ws, filepath.FromSlash(rel))
	fi, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return &change{del: true}, nil
	}
	if err != nil {
		return nil, gitErr("read "+rel, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, uerr.New(CodeBadPath, fmt.Sprintf("%s is not a regular file", rel), "only regular files are committed", "commit that path with git yourself")
	}
	if fi.Size() > maxFileBytes {
		return nil, uerr.New(CodeBadRequest, fmt.Sprintf("%s is %d bytes", rel, fi.Size()), fmt.Sprintf("files above %d bytes are not committed by fluffy", maxFileBytes), "commit it with git yourself")
	}
	data, err := readLimited(full)
	if err != nil {
		return nil, gitErr("read "+rel, err)
	}
	return &change{content: data, exec: fi.Mode()&0o100 != 0}, nil
}

// write leaves the new objects as loose objects and the summary in
// dir/<id>/, through a temporary directory renamed at the end.
func (b *builder) write(dir string, out vcs.CommitOutput) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	tmp := filepath.Join(dir, ".tmp-"+hex.EncodeToString(rb[:]))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, h := range b.now {
		o, err := b.mem.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return err
		}
		hs := h.String()
		p := filepath.Join(tmp, "objects", hs[:2], hs[2:])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := writeLoose(p, o); err != nil {
			return err
		}
	}
	js, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, vcs.CommitFile), append(js, '\n'), 0o644); err != nil {
		return err
	}
	final := filepath.Join(dir, out.Commit)
	_ = os.RemoveAll(final)
	return os.Rename(tmp, final)
}

func writeLoose(p string, o plumbing.EncodedObject) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	w := objfile.NewWriter(f)
	err = func() error {
		if err := w.WriteHeader(o.Type(), o.Size()); err != nil {
			return err
		}
		rd, err := o.Reader()
		if err != nil {
			return err
		}
		defer rd.Close()
		_, err = io.Copy(w, rd)
		return err
	}()
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
