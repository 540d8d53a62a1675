package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Dir is where a file is replaced: the host filesystem (OS) or an *os.Root,
// whose names are relative to it and can never leave it.
type Dir interface {
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Open(name string) (*os.File, error)
	Rename(oldname, newname string) error
	Remove(name string) error
}

// OS is the host filesystem as a Dir.
type OS struct{}

func (OS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
func (OS) Open(name string) (*os.File, error)   { return os.Open(name) }
func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (OS) Remove(name string) error             { return os.Remove(name) }

// Options tune Replace.
type Options struct {
	// Temp is the temporary file's base name, for callers whose crash
	// recovery looks for it; empty means a fresh random name.
	Temp string
	// NoSync skips both syncs: for caches and for records whose loss in a
	// machine crash the reader already tolerates. The rename still makes
	// the replacement atomic for every other process.
	NoSync bool
}

// Write durably replaces path with data, with permissions perm.
func Write(path string, data []byte, perm fs.FileMode) error {
	return Replace(OS{}, path, perm, Options{}, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc durably replaces path with what write writes.
func WriteFunc(path string, perm fs.FileMode, write func(io.Writer) error) error {
	return Replace(OS{}, path, perm, Options{}, write)
}

// Replace replaces name in d with what write writes.
func Replace(d Dir, name string, perm fs.FileMode, o Options, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(name)
	tmpName := o.Temp
	if tmpName == "" {
		var r [6]byte
		if _, err := rand.Read(r[:]); err != nil {
			return err
		}
		tmpName = "." + filepath.Base(name) + ".tmp-" + hex.EncodeToString(r[:])
	}
	tmp := filepath.Join(dir, tmpName)
	f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = d.Remove(tmp)
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	// The umask narrowed the create mode.
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if !o.NoSync {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = d.Rename(tmp, name); err != nil {
		return err
	}
	if o.NoSync {
		return nil
	}
	return syncDir(d, dir)
}

func syncDir(d Dir, dir string) error {
	df, err := d.Open(dir)
	if err != nil {
		return err
	}
	err = df.Sync()
	if cerr := df.Close(); err == nil {
		err = cerr
	}
	// Some filesystems cannot sync a directory; the rename has happened.
	if errors.Is(err, os.ErrInvalid) {
		return nil
	}
	return err
}

// compile-time check: an *os.Root is a Dir.
var _ Dir = (*os.Root)(nil)
