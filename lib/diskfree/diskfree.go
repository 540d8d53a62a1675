package diskfree

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// CodeDiskFull: not enough free space to go on safely.
const CodeDiskFull = "DISK_FULL"

// Reserve is kept free beyond what a caller will write: the audit log, the
// project database and the session blobs share the disk, and badger
// crashes instead of failing when it fills.
const Reserve = 256 << 20

// Free is the space available to this user on the filesystem of path.
func Free(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Ensure returns nil when the filesystem of path has need + Reserve bytes
// free, and a DISK_FULL error otherwise. what names who needs the space
// ("the kernel's stores", "plugin x's /out"); need > 0 is explained as
// the most that will be written there.
func Ensure(path string, need int64, what string) error {
	free, err := Free(path)
	if err != nil {
		return err
	}
	want := need + Reserve
	if free >= want {
		return nil
	}
	why := fmt.Sprintf("%s has %s free; fluffy keeps %s free for its own stores (audit log, project database)", path, MiB(free), MiB(Reserve))
	if need > 0 {
		why += fmt.Sprintf(" and %s may write up to %s there", what, MiB(need))
	}
	why += fmt.Sprintf(", so it needs %s", MiB(want))
	return uerr.New(CodeDiskFull, "not enough free disk space for "+what, why,
		fmt.Sprintf("free at least %s on the filesystem of %s, then try again", MiB(want-free), path))
}

// MiB renders a byte count for people: "12.3 MiB".
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
