package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// CodeBinaryMismatch is the error code of a plugin binary whose bytes are
// not the ones the registry recorded.
const CodeBinaryMismatch = "PLUGIN_CHECKSUM_MISMATCH"

// BinaryStore is the kernel's content-addressed copy of every plugin binary
// it runs: $FLUFFY_HOME/cas/sha256/<hex>, directories 0700, files 0555 (read-only;
// readable by all so the container's non-root user can exec its bind mount:
// the 0700 directory keeps other host users out).
// Launchers run (exec or bind-mount) only a path it returned, so the bytes
// that run are the bytes that were hashed: the copy is hashed while it is
// written, compared with the expected sum, and only then renamed into place.
// A change to the source after that cannot reach the copy.
//
// Hashing is cached per process, keyed by the file's identity (device,
// inode, size, mode, mtime and ctime): a file whose identity did not change
// since it was hashed has the same bytes (a write or chmod moves ctime, which
// an unprivileged process cannot set back). A source whose identity changed
// is hashed again, so a swapped store binary is refused at the next start.
type BinaryStore struct {
	dir string

	mu   sync.Mutex
	seen map[string]fileID // path → identity when its bytes were last verified
	sums map[string]string // path → the sum they had
}

// fileID is what a file's identity is made of for the hash cache.
type fileID struct {
	dev, ino   uint64
	size       int64
	mode       fs.FileMode
	mtim, ctim syscall.Timespec
}

func identity(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(), mode: fi.Mode(), mtim: st.Mtim, ctim: st.Ctim}, true //nolint:unconvert // Dev is not uint64 everywhere
}

// OpenBinaryStore creates (0700) and returns the store rooted at dir
// (conventionally $FLUFFY_HOME/cas).
func OpenBinaryStore(dir string) (*BinaryStore, error) {
	root := filepath.Join(dir, "sha256")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create binary store %s: %w", root, err)
	}
	// MkdirAll keeps an existing directory's mode: make both private.
	for _, d := range []string{dir, root} {
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("binary store %s: %w", d, err)
		}
	}
	return &BinaryStore{dir: root, seen: map[string]fileID{}, sums: map[string]string{}}, nil
}

// Dir is the directory holding the copies (…/cas/sha256).
func (b *BinaryStore) Dir() string { return b.dir }

// Path is where the copy of the binary with sum lives.
func (b *BinaryStore) Path(sum string) string { return filepath.Join(b.dir, strings.ToLower(sum)) }

// Materialize returns the store path of src's bytes after checking that
// they hash to want (lowercase or uppercase hex). It hashes src while
// copying it (or, when src is unchanged since it was last verified and the
// copy is intact, only stats both). A src that does not hash to want is a
// *uerr.Error with code CodeBinaryMismatch; nothing is stored then.
func (b *BinaryStore) Materialize(name, src, want string) (string, error) {
	want = strings.ToLower(want)
	if raw, err := hex.DecodeString(want); err != nil || len(raw) != sha256.Size {
		return "", uerr.New(CodeBinaryMismatch, fmt.Sprintf("plugin %s has no usable checksum", name),
			fmt.Sprintf("the recorded sha256 %q is not 64 hex digits", want), "reinstall the plugin so the registry records its binary's sha256")
	}
	dst := b.Path(want)
	if b.fresh(src, want) && b.intact(dst, want) {
		return dst, nil
	}
	got, err := b.copyHashed(src, dst, want)
	if err != nil {
		return "", uerr.Wrap(err, "PLUGIN_BINARY_UNREADABLE", fmt.Sprintf("cannot read plugin %s's binary", name), err.Error(),
			"reinstall the plugin with `fluffy plugin install`")
	}
	if got != want {
		return "", uerr.New(CodeBinaryMismatch, fmt.Sprintf("plugin %s's binary is not the one that was approved", name),
			fmt.Sprintf("%s hashes to %s, the registry recorded %s at install; it was replaced or modified, and was not run", src, got, want),
			"reinstall the plugin from a trusted source (`fluffy plugin install PATH --force`) and find out what changed it")
	}
	return dst, nil
}

// Adopt copies src into the store, hashing it as it is copied, for a binary
// that has no recorded sum (an adapter named by FLUFFY_RUNTIME_ADAPTER). It
// returns the copy and the sum of the bytes it holds.
func (b *BinaryStore) Adopt(name, src string) (string, string, error) {
	tmp, err := b.copyHashed(src, "", "")
	if err != nil {
		return "", "", uerr.Wrap(err, "PLUGIN_BINARY_UNREADABLE", fmt.Sprintf("cannot read %s's binary", name), err.Error(), "check the path and its permissions")
	}
	return b.Path(tmp), tmp, nil
}

// fresh reports whether src was verified to hash to want and has not
// changed since.
func (b *BinaryStore) fresh(src, want string) bool {
	fi, err := os.Stat(src)
	if err != nil {
		return false
	}
	id, ok := identity(fi)
	b.mu.Lock()
	defer b.mu.Unlock()
	return ok && b.seen[src] == id && b.sums[src] == want
}

// intact reports whether the copy at dst is still what was stored: a
// regular 0555 file, not a link, unchanged since it was verified (hashing
// it again when this process has not seen it yet).
func (b *BinaryStore) intact(dst, want string) bool {
	fi, err := os.Lstat(dst)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o555 {
		return false
	}
	id, ok := identity(fi)
	if !ok {
		return false
	}
	b.mu.Lock()
	cached := b.seen[dst] == id && b.sums[dst] == want
	b.mu.Unlock()
	if cached {
		return true
	}
	f, err := os.Open(dst)
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil || hex.EncodeToString(h.Sum(nil)) != want {
		return false
	}
	b.remember(dst, fi, want)
	return true
}

func (b *BinaryStore) remember(path string, fi fs.FileInfo, sum string) {
	id, ok := identity(fi)
	if !ok {
		return
	}
	b.mu.Lock()
	b.seen[path], b.sums[path] = id, sum
	b.mu.Unlock()
}

// copyHashed copies src into a temporary file beside dst, hashing exactly
// the bytes it writes, and publishes it as dst when they hash to want (any
// sum, to Path(sum), when want and dst are ""). It returns the sum of what
// it read.
func (b *BinaryStore) copyHashed(src, dst, want string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	before, err := in.Stat()
	if err != nil {
		return "", err
	}
	if !before.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", src)
	}
	tmp, err := os.CreateTemp(b.dir, ".incoming-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), in); err != nil {
		tmp.Close()
		return "", err
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want == "" {
		want, dst = got, b.Path(got)
	}
	if got != want {
		tmp.Close()
		return got, nil
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	// A copy already there is kept if intact, replaced if damaged.
	if err := b.publish(tmp.Name(), dst, want); err != nil {
		return "", err
	}
	fi, err := os.Lstat(dst)
	if err != nil {
		return "", err
	}
	b.remember(dst, fi, want)
	// The source is remembered with the identity it had when it was opened:
	// if it changed while being read, the next start reads it again.
	if after, err := os.Stat(src); err == nil && sameID(before, after) {
		b.remember(src, before, want)
	}
	return got, nil
}

func sameID(a, b fs.FileInfo) bool {
	x, ok1 := identity(a)
	y, ok2 := identity(b)
	return ok1 && ok2 && x == y
}

// publish puts the verified file tmp at dst unless an intact copy of the
// same bytes is already there: that one is kept, because sandboxes of this
// and other kernels on the same home bind-mount or run it, and a rename
// over it would unlink the inode under them (their /proc/self/exe then
// resolves to nothing, and a plugin that re-executes itself breaks). The
// link fails instead of replacing, so two kernels publishing at once never
// swap a file one of them already runs; only a damaged dst is replaced.
func (b *BinaryStore) publish(tmp, dst, want string) error {
	err := os.Link(tmp, dst)
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	if b.intact(dst, want) {
		return nil
	}
	return os.Rename(tmp, dst)
}
