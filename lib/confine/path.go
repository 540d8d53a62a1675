package confine

import (
	"fmt"
	"path"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Error codes of path problems. Tools return them to the AI; the kernel
// returns them to plugins and users.
const (
	CodeInvalid  = "FS_PATH_INVALID"  // NUL, backslash, empty name
	CodeAbsolute = "FS_PATH_ABSOLUTE" // starts with "/"
	CodeEscapes  = "FS_PATH_ESCAPES"  // ".." or a symlink leaves the root
	CodeSymlink  = "FS_PATH_SYMLINK"  // a write would go through a symlink
	CodeNotFound = "FS_NOT_FOUND"     // nothing at that path
	CodeReserved = "FS_PATH_RESERVED" // .fluffy/ or .git/: never a plugin's to write
)

// KernelDir is the project directory that holds the kernel's own data
// (policy, database). No plugin ever sees or writes anything inside it.
const KernelDir = ".fluffy"

// Check reports why p is not a canonical project-relative path, or "" when
// it is one. It is purely lexical and does not allocate: p must be
// non-empty, relative, free of NUL and backslash, and have no ".."
// segment ("." and empty segments are harmless and ignored). It is what
// the policy engine requires of every request path; callers that accept
// looser spellings use Clean first.
func Check(p string) string {
	if p == "" {
		return "empty path"
	}
	if p[0] == '/' {
		return "absolute path; policy paths are project-relative"
	}
	named := false
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) {
			c := p[i]
			if c == 0 || c == '\\' {
				return "path contains a backslash or NUL byte"
			}
			if c != '/' {
				continue
			}
		}
		seg := p[start:i]
		switch seg {
		case "..":
			return "path leaves the project (..)"
		case "", ".":
		default:
			named = true
		}
		start = i + 1
	}
	if !named {
		return "empty path"
	}
	return ""
}

// IsRoot reports whether p names the project root itself: relative, only
// "." segments and slashes (".", "./", "./."). Check calls such a path
// empty; callers that judge the whole project (listing, searching) accept
// it as the root.
func IsRoot(p string) bool {
	if p == "" || p[0] == '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '.' && p[i] != '/' {
			return false
		}
	}
	return !strings.Contains(p, "..")
}

// Clean validates a project-relative path given by a plugin, the AI or the
// user and returns it cleaned and slash-separated ("." for the root or an
// empty path). ".." is allowed while it stays inside ("a/../b" is "b").
func Clean(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.ContainsRune(p, 0) || strings.ContainsRune(p, '\\') {
		return "", uerr.New(CodeInvalid, fmt.Sprintf("path %q contains a NUL byte or a backslash", p),
			"project paths are slash-separated and cannot contain NUL", "send a plain relative path such as \"src/main.go\"")
	}
	if path.IsAbs(p) {
		return "", uerr.New(CodeAbsolute, fmt.Sprintf("path %q is absolute", p),
			"tools only see the project, addressed by paths relative to its root", "use a path relative to the project root, e.g. \"src/main.go\"")
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", uerr.New(CodeEscapes, fmt.Sprintf("path %q leaves the project root", p),
			"`..` would reach outside the project, which tools may not see", "use a path inside the project")
	}
	return c, nil
}

// Name validates one path element chosen by someone else (an operation
// id, an instance id): non-empty, not "." or "..", no slash, backslash or
// NUL.
func Name(s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00") {
		return uerr.New(CodeInvalid, fmt.Sprintf("%q is not a plain name", s),
			"it must name exactly one directory entry", "use a name without slashes, NUL, \".\" or \"..\"")
	}
	return nil
}

// First returns the first segment of a cleaned relative path.
func First(rel string) string {
	if i := strings.IndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return rel
}

// InKernelDir reports whether a cleaned relative path is the kernel's
// .fluffy directory or inside it, in any letter case (case-insensitive
// filesystems make ".FLUFFY" the same directory).
func InKernelDir(rel string) bool {
	return strings.EqualFold(First(strings.TrimPrefix(rel, "./")), KernelDir)
}

// HasGitDir reports whether any segment of a cleaned relative path is a
// .git directory (in any case): the repository's own files, or a nested
// repository's, where a written file could become a hook that runs.
func HasGitDir(rel string) bool {
	for rel != "" {
		seg := rel
		if i := strings.IndexByte(rel, '/'); i >= 0 {
			seg, rel = rel[:i], rel[i+1:]
		} else {
			rel = ""
		}
		if strings.EqualFold(seg, ".git") {
			return true
		}
	}
	return false
}

// Writable validates a path a plugin proposes to write: Clean, not the
// root, and not inside .fluffy/ or any .git/ directory.
func Writable(p string) (string, error) {
	c, err := Clean(p)
	if err != nil {
		return "", err
	}
	switch {
	case c == ".":
		return "", uerr.New(CodeInvalid, "cannot write the project root", "the path names the root directory", "name a file inside the project")
	case InKernelDir(c):
		return "", uerr.New(CodeReserved, fmt.Sprintf("%s is inside the kernel's %s directory", c, KernelDir),
			"the policy, audit log and session data are the kernel's; no plugin writes them", "write files of the project itself")
	case HasGitDir(c):
		return "", uerr.New(CodeReserved, fmt.Sprintf("%s is inside a .git directory", c),
			"repository internals (config, hooks, objects) are changed only by the kernel's commit step", "write the project's files; commits are made after merge")
	}
	return c, nil
}
