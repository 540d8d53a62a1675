package store

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockPath is the lock file beside the database directory. It is outside
// the directory so that it stays valid when recovery moves the directory
// aside.
func lockPath(dir string) string { return dir + ".lock" }

// errBusy means another process holds the lock file.
var errBusy = errors.New("another process holds the database's lock file")

// lockDir takes the lock file of dir (exclusive, or shared when readOnly)
// without waiting. It is taken before anything reads the database's files:
// the damage check must never run over files another process is changing
// (a table compacted away between reading the MANIFEST and opening it
// would look like damage, and recovery would move a live database aside).
// A read-only open where the lock file cannot be created goes on without
// it (badger's own directory lock still applies).
func lockDir(dir string, readOnly bool) (*os.File, error) {
	flags := os.O_RDWR | os.O_CREATE
	if readOnly {
		flags = os.O_RDONLY
	}
	f, err := os.OpenFile(lockPath(dir), flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if readOnly {
			return nil, nil
		}
		return nil, err
	}
	how := unix.LOCK_EX
	if readOnly {
		how = unix.LOCK_SH
	}
	for {
		err = unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errBusy
		}
		return nil, err
	}
	return f, nil
}

func unlockDir(f *os.File) {
	if f != nil {
		_ = f.Close() // closing the only descriptor releases the flock
	}
}
