package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// MaxLinks bounds how many symbolic links one resolution follows (the
// kernel's own limit, ELOOP, is 40).
const MaxLinks = 40

// Root is a directory that paths are confined to. Its methods take paths
// relative to the directory; none of them ever reaches outside it, even
// through a symbolic link. It is safe for concurrent use.
type Root struct {
	r   *os.Root
	dir string
}

// OpenRoot opens dir as a confinement root.
func OpenRoot(dir string) (*Root, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return &Root{r: r, dir: dir}, nil
}

// Close releases the root's directory handle.
func (r *Root) Close() error { return r.r.Close() }

// Dir is the host path the root was opened at.
func (r *Root) Dir() string { return r.dir }

// OS is the underlying os.Root, for operations this type does not wrap.
func (r *Root) OS() *os.Root { return r.r }

// Resolve returns the canonical path of what rel names: every symbolic
// link on the way (in any component) is followed, and the result contains
// none. It fails with FS_PATH_ESCAPES when a link leaves the root (an
// absolute target, or ".." above it), FS_NOT_FOUND when a component does
// not exist, and FS_PATH_INVALID on a link loop. rel is cleaned
// lexically first (Clean: "a/link/../b" is "a/b"), as the policy sees it.
//
// This is how a path is judged by what it points at: "docs/notes.txt", a
// link to "../.env", resolves to ".env".
func (r *Root) Resolve(rel string) (string, error) {
	c, err := Clean(rel)
	if err != nil {
		return "", err
	}
	if c == "." {
		return ".", nil
	}
	todo := strings.Split(c, "/")
	var done []string
	links := 0
	for len(todo) > 0 {
		seg := todo[0]
		todo = todo[1:]
		switch seg {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", escapes(rel, "a symbolic link on the way points above the project root")
			}
			done = done[:len(done)-1]
			continue
		}
		cand := path.Join(append(done, seg)...)
		fi, err := r.r.Lstat(cand)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", uerr.Wrap(err, CodeNotFound, fmt.Sprintf("%s does not exist", c), "no file or directory at "+cand, "check the path")
			}
			return "", fsError(c, err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, seg)
			continue
		}
		if links++; links > MaxLinks {
			return "", uerr.New(CodeInvalid, fmt.Sprintf("%s goes through too many symbolic links", c), "a link loop, or a chain longer than 40 links", "point the link at its final target")
		}
		target, err := r.r.Readlink(cand)
		if err != nil {
			return "", fsError(c, err)
		}
		if target == "" || path.IsAbs(target) || strings.ContainsRune(target, 0) {
			return "", escapes(rel, fmt.Sprintf("%s is a symbolic link to %q, which is not inside the project", cand, target))
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

// NoLinks checks that neither rel nor any of its existing parent
// directories is a symbolic link, so that writing rel changes exactly the
// file it names. Components that do not exist yet are fine (a new file in
// a new directory).
func (r *Root) NoLinks(rel string) error {
	c, err := Clean(rel)
	if err != nil {
		return err
	}
	if c == "." {
		return nil
	}
	segs := strings.Split(c, "/")
	for i := range segs {
		cand := strings.Join(segs[:i+1], "/")
		fi, err := r.r.Lstat(cand)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fsError(c, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return uerr.New(CodeSymlink, fmt.Sprintf("%s goes through the symbolic link %s", c, cand),
				"a write through a link would change a file other than the one named", "write the link's target path instead")
		}
		if i < len(segs)-1 && !fi.IsDir() {
			return uerr.New(CodeInvalid, fmt.Sprintf("%s: %s is a file, not a directory", c, cand), "a parent of the path is a file", "choose a path whose parents are directories")
		}
	}
	return nil
}

// Open opens the file rel names after resolving it; the second result is
// its canonical path.
func (r *Root) Open(rel string) (*os.File, string, error) {
	canon, err := r.Resolve(rel)
	if err != nil {
		return nil, "", err
	}
	f, err := r.r.Open(canon)
	if err != nil {
		return nil, canon, fsError(canon, err)
	}
	return f, canon, nil
}

// Lstat is os.Root.Lstat of a cleaned rel (the last component is not
// followed).
func (r *Root) Lstat(rel string) (fs.FileInfo, error) {
	c, err := Clean(rel)
	if err != nil {
		return nil, err
	}
	fi, err := r.r.Lstat(c)
	if err != nil {
		return nil, fsError(c, err)
	}
	return fi, nil
}

func escapes(rel, why string) error {
	return uerr.New(CodeEscapes, fmt.Sprintf("path %q leaves the project root", rel), why, "use a path whose target is inside the project")
}

// fsError maps an os error on a confined path to a structured error.
func fsError(rel string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return uerr.Wrap(err, CodeNotFound, fmt.Sprintf("%s does not exist", rel), "no file or directory at that path in the project", "check the path")
	case strings.Contains(err.Error(), "escapes from parent"):
		return uerr.Wrap(err, CodeEscapes, fmt.Sprintf("path %q leaves the project root", rel), "it goes through a symbolic link that points outside the project", "use a path whose target is inside the project")
	case errors.Is(err, fs.ErrPermission):
		return uerr.Wrap(err, "FS_PERMISSION", fmt.Sprintf("%s is not readable", rel), err.Error(), "check the file's permissions")
	}
	return fmt.Errorf("%s: %w", rel, err)
}

// FSError is the structured form of an error from an os.Root operation on
// rel (not found, escapes, permission).
func FSError(rel string, err error) error { return fsError(rel, err) }
