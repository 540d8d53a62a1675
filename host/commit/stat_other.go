//go:build !linux

package commit

import (
	"io/fs"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// fillStat copies what is portable of the file's stat data; git re-reads
// the file when the rest does not match.
func fillStat(e *index.Entry, fi fs.FileInfo) {
	e.ModifiedAt, e.Size = fi.ModTime(), uint32(fi.Size())
}
