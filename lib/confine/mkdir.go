package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// MkdirAll creates the directory rel below the trusted directory base, one
// component at a time with mkdirat and openat(O_NOFOLLOW): no symbolic link
// in rel is ever followed, so a link planted where a kernel directory
// should be (a project's `.fluffy/out → /elsewhere`, an instance directory
// replaced by a link) is refused with FS_PATH_SYMLINK instead of creating
// or chmod-ing something outside base. New components get perm (minus the
// umask). The returned handle is the final directory, opened without
// following links: use it (Chmod, Chown) instead of the path, so nothing
// swapped in later is changed. base itself is trusted and may be a link.
func MkdirAll(base, rel string, perm fs.FileMode) (*os.File, error) {
	c, err := Clean(rel)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", base, err)
	}
	if c != "." {
		done := base
		for _, seg := range strings.Split(c, "/") {
			done = filepath.Join(done, seg)
			if err := unix.Mkdirat(fd, seg, uint32(perm.Perm())); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return nil, fmt.Errorf("create %s: %w", done, err)
			}
			next, err := unix.Openat(fd, seg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			unix.Close(fd)
			if err != nil {
				var st unix.Stat_t
				if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) && unix.Lstat(done, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					return nil, uerr.New(CodeSymlink, done+" is a symbolic link, not a directory",
						"fluffy creates its own directories without following links, so a link planted there cannot send its data elsewhere",
						"remove "+done+" (fluffy creates it again)")
				}
				if errors.Is(err, unix.ENOTDIR) {
					return nil, uerr.New(CodeInvalid, done+" is not a directory", "fluffy needs a directory at that path", "remove or move "+done)
				}
				return nil, fmt.Errorf("open %s: %w", done, err)
			}
			fd = next
		}
	}
	return os.NewFile(uintptr(fd), filepath.Join(base, c)), nil
}
