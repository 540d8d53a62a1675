package toolpath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/fluffy-waffle/fluffy/uerr"
)

// Clean validates a project-relative path and returns it cleaned and
// slash-separated ("." for the root, also for "").
func Clean(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.ContainsRune(p, 0) {
		return "", uerr.New("FS_PATH_INVALID", "path contains a NUL byte", "NUL cannot appear in file names", "send a plain relative path")
	}
	p = filepath.ToSlash(p)
	if path.IsAbs(p) || filepath.IsAbs(p) || (len(p) > 1 && p[1] == ':') {
		return "", uerr.New("FS_PATH_ABSOLUTE", fmt.Sprintf("path %q is absolute", p),
			"tools only see the project, addressed by paths relative to its root", "use a path relative to the project root, e.g. \"src/main.go\"")
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", uerr.New("FS_PATH_ESCAPES", fmt.Sprintf("path %q leaves the project root", p),
			"`..` would reach outside the project, which tools may not see", "use a path inside the project")
	}
	return c, nil
}

// OpenRoot opens the workspace as an os.Root. tool names the plugin for the
// error a misconfigured kernel gets.
func OpenRoot(tool, workspace string) (*os.Root, error) {
	if workspace == "" {
		return nil, uerr.New("FS_NOT_CONFIGURED", tool+" has no workspace", "the kernel did not send a workspace in Configure", "this is a kernel bug; report it")
	}
	r, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", workspace, err)
	}
	return r, nil
}

// Err turns an os error on the confined path rel into a structured error
// (not found, escapes through a symlink, permission); other errors are
// wrapped with the path.
func Err(rel string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return uerr.Wrap(err, "FS_NOT_FOUND", fmt.Sprintf("%s does not exist", rel), "no file or directory at that path in the project", "check the path with fs.list")
	case errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes"),
		strings.Contains(err.Error(), "path escapes from parent"):
		return uerr.Wrap(err, "FS_PATH_ESCAPES", fmt.Sprintf("path %q leaves the project root", rel), "it goes through a symlink that points outside the project", "use a path whose target is inside the project")
	case errors.Is(err, fs.ErrPermission):
		return uerr.Wrap(err, "FS_PERMISSION", fmt.Sprintf("%s is not readable", rel), err.Error(), "check the file's permissions")
	}
	return fmt.Errorf("%s: %w", rel, err)
}
