package commit

import (
	"io/fs"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// fillStat copies the file's stat data into an index entry, as git does.
func fillStat(e *index.Entry, fi fs.FileInfo) {
	e.ModifiedAt, e.Size = fi.ModTime(), uint32(fi.Size())
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.CreatedAt = time.Unix(s.Ctim.Sec, s.Ctim.Nsec)
		e.Dev, e.Inode, e.UID, e.GID = uint32(s.Dev), uint32(s.Ino), s.Uid, s.Gid
	}
}
