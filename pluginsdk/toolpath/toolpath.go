package toolpath

import (
	"os"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Clean validates a project-relative path and returns it cleaned and
// slash-separated ("." for the root, also for ""). It is confine.Clean:
// no NUL or backslash, not absolute, no ".." leaving the root.
func Clean(p string) (string, error) { return confine.Clean(p) }

// OpenRoot opens the workspace as an os.Root. tool names the plugin for the
// error a misconfigured kernel gets.
func OpenRoot(tool, workspace string) (*os.Root, error) {
	if workspace == "" {
		return nil, uerr.New("FS_NOT_CONFIGURED", tool+" has no workspace", "the kernel did not send a workspace in Configure", "this is a kernel bug; report it")
	}
	r, err := confine.OpenRoot(workspace)
	if err != nil {
		return nil, err
	}
	return r.OS(), nil
}

// Err turns an os error on the confined path rel into a structured error
// (not found, escapes through a symlink, permission); other errors are
// wrapped with the path. It is confine.FSError.
func Err(rel string, err error) error { return confine.FSError(rel, err) }
