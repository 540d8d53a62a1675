package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"

	"github.com/fluffy-waffle/fluffy/lib/glob"
)

// maxIgnoreFileBytes bounds how much of one .gitignore is read.
const maxIgnoreFileBytes = 1 << 20

// ignoreRule is one line of a .gitignore file.
type ignoreRule struct {
	pat    *glob.Pattern
	negate bool
}

// ignoreLevel is the rules of one .gitignore, relative to its directory
// (base, "" for the project root).
type ignoreLevel struct {
	base  string
	rules []ignoreRule
}

// parseIgnore reads .gitignore lines. Blank lines and comments are skipped,
// unescaped trailing blanks removed; a line the glob package cannot compile
// (leading blanks, a lone backslash) is skipped, as git skips what it
// cannot use.
func parseIgnore(r io.Reader, base string) *ignoreLevel {
	lv := &ignoreLevel{base: base}
	sc := bufio.NewScanner(io.LimitReader(r, maxIgnoreFileBytes))
	sc.Buffer(make([]byte, 0, 4096), maxIgnoreFileBytes)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
			line = line[:len(line)-1]
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p, err := glob.Compile(line)
		if err != nil {
			continue
		}
		lv.rules = append(lv.rules, ignoreRule{pat: p, negate: p.Negated()})
	}
	if len(lv.rules) == 0 {
		return nil
	}
	return lv
}

// openAt opens name relative to the directory dirfd without following a
// symlink in its last component. Lookups relative to a directory
// descriptor also never start at the container's root, which under some
// storage drivers (fuse-overlayfs) costs a FUSE round trip per path.
func openAt(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flags|syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func loadIgnore(dirfd int, name, base string) *ignoreLevel {
	fd, err := openAt(dirfd, name, syscall.O_NONBLOCK)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	return parseIgnore(f, base)
}

// ignored applies git's precedence: the deepest .gitignore first, and in
// each the last matching line wins; a `!` line re-includes.
func ignored(levels []*ignoreLevel, rel string, isDir bool) bool {
	for i := len(levels) - 1; i >= 0; i-- {
		lv := levels[i]
		sub := rel
		if lv.base != "" {
			var ok bool
			if sub, ok = strings.CutPrefix(rel, lv.base+"/"); !ok {
				continue
			}
		}
		if isDir {
			sub += "/"
		}
		pth := glob.ParsePath(sub)
		for j := len(lv.rules) - 1; j >= 0; j-- {
			if lv.rules[j].pat.MatchSelf(pth) {
				return !lv.rules[j].negate
			}
		}
	}
	return false
}

// walker lists the regular files under a directory of the workspace in
// lexical order, honouring .gitignore files, never following symlinks and
// never entering .git. It walks by directory descriptors (openat with
// O_NOFOLLOW at every step), so a directory swapped for a symlink during
// the walk cannot lead it out of the workspace.
type walker struct {
	root string // host path of the workspace
	ctx  context.Context
	// visitDirs, when set, also reports directories (search.glob's
	// dir-only patterns).
	visitDirs bool
	// seen counts directory entries looked at, to check ctx now and then.
	seen int
}

// visitFunc gets each entry: the descriptor of its directory, its name,
// its project-relative path and whether it is a directory.
type visitFunc func(dirfd int, name, rel string, isDir bool) error

// errStop ends a walk early without an error.
var errStop = fs.SkipAll

// openDir opens a cleaned project-relative directory ("." for the root)
// one component at a time, never through a symlink.
func (w *walker) openDir(rel string) (*os.File, error) {
	fd, err := syscall.Open(w.root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: w.root, Err: err}
	}
	if rel != "." {
		for _, part := range strings.Split(rel, "/") {
			nfd, err := openAt(fd, part, syscall.O_DIRECTORY)
			syscall.Close(fd)
			if err != nil {
				return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
			}
			fd = nfd
		}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// walk calls fn for every file (and, with visitDirs, directory) below
// start, a cleaned project-relative directory ("." for the root). The
// .gitignore files of start's ancestors apply too.
func (w *walker) walk(start string, fn visitFunc) error {
	rootDir, err := w.openDir(".")
	if err != nil {
		return err
	}
	levels := []*ignoreLevel{}
	if lv := loadIgnore(int(rootDir.Fd()), ".git/info/exclude", ""); lv != nil {
		levels = append(levels, lv)
	}
	rootDir.Close()
	if start != "." {
		// Ancestors' rules, root first.
		parts := strings.Split(start, "/")
		for i := 0; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/")
			if dir == "" {
				dir = "."
			}
			d, err := w.openDir(dir)
			if err != nil {
				return err
			}
			base := strings.Join(parts[:i], "/")
			if lv := loadIgnore(int(d.Fd()), ".gitignore", base); lv != nil {
				levels = append(levels, lv)
			}
			d.Close()
		}
	}
	d, err := w.openDir(start)
	if err != nil {
		return err
	}
	err = w.dir(d, start, levels, fn)
	d.Close()
	if err == errStop {
		return nil
	}
	return err
}

func (w *walker) dir(d *os.File, relDir string, levels []*ignoreLevel, fn visitFunc) error {
	ents, err := d.ReadDir(-1)
	if err != nil {
		// A directory that cannot be read is skipped, as grep -r does,
		// rather than failing the whole search.
		return nil
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	dfd := int(d.Fd())
	base := relDir
	if base == "." {
		base = ""
	}
	for _, e := range ents {
		if e.Name() == ".gitignore" {
			if lv := loadIgnore(dfd, ".gitignore", base); lv != nil {
				levels = append(levels[:len(levels):len(levels)], lv)
			}
			break
		}
	}
	for _, e := range ents {
		w.seen++
		if w.seen%256 == 0 && w.ctx.Err() != nil {
			return w.ctx.Err()
		}
		name := e.Name()
		t := e.Type()
		if t&fs.ModeSymlink != 0 || (!t.IsDir() && !t.IsRegular()) {
			continue
		}
		if t.IsDir() && name == ".git" {
			continue
		}
		rel := name
		if base != "" {
			rel = base + "/" + name
		}
		if ignored(levels, rel, t.IsDir()) {
			continue
		}
		if !t.IsDir() {
			if err := fn(dfd, name, rel, false); err != nil {
				return err
			}
			continue
		}
		if w.visitDirs {
			if err := fn(dfd, name, rel, true); err != nil {
				return err
			}
		}
		cfd, err := openAt(dfd, name, syscall.O_DIRECTORY)
		if err != nil {
			continue // vanished, or replaced by a symlink since the listing
		}
		child := os.NewFile(uintptr(cfd), rel)
		err = w.dir(child, rel, levels, fn)
		child.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// isBinary applies git's and grep's heuristic: a NUL byte in the first
// 8000 bytes.
func isBinary(head []byte) bool {
	return bytes.IndexByte(head[:min(len(head), 8000)], 0) >= 0
}
