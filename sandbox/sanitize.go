package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Modes everything left in an output directory gets.
const (
	outDirMode  = os.ModeSetgid | 0o770
	outFileMode = 0o660
	outExecMode = 0o770
)

// SanitizeOut makes a plugin's output directory hold only what the kernel
// may collect: regular files and directories, owned by the kernel's user
// with the sandbox's group, modes normalised (directories 2770, files 0660,
// or 0770 when the plugin set any execute bit; no setuid, setgid or sticky
// file). Everything else — symbolic links (never followed), FIFOs, sockets,
// devices — and every entry whose name holds a control character or is not
// UTF-8 is removed, with what is below it. It works on directory handles
// (openat, O_NOFOLLOW), so a plugin still running cannot redirect it
// through a link swapped in meanwhile. It returns the removed paths,
// relative to dir.
func SanitizeOut(dir string) ([]string, error) {
	_, gid := GuestIdentity()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sanitize %s: %w", dir, err)
	}
	defer unix.Close(fd)
	s := sanitizer{uid: os.Getuid(), gid: gid}
	err = s.dir(fd, ".", 0)
	if err != nil {
		err = fmt.Errorf("sanitize %s: %w", dir, err)
	}
	return s.removed, err
}

type sanitizer struct {
	uid, gid int
	removed  []string
}

// maxDepth bounds the recursion (a path cannot be longer than PATH_MAX
// anyway, so this is only a guard).
const maxDepth = 256

func (s *sanitizer) dir(fd int, rel string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%s: nested deeper than %d directories", rel, maxDepth)
	}
	// Owner first, so the mode change and the reads below are allowed.
	if err := unix.Fchown(fd, s.uid, s.gid); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if err := unix.Fchmod(fd, uint32(outDirMode.Perm())|unix.S_ISGID); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	names, err := readNames(fd)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, name := range names {
		p := path.Join(rel, name)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				keep(fmt.Errorf("%s: %w", p, err))
			}
			continue
		}
		kind := st.Mode & unix.S_IFMT
		if !cleanName(name) || (kind != unix.S_IFDIR && kind != unix.S_IFREG) {
			keep(s.remove(fd, name, p, depth))
			continue
		}
		if kind == unix.S_IFDIR {
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				// Swapped for something else meanwhile, or unreadable.
				keep(s.remove(fd, name, p, depth))
				continue
			}
			keep(s.dir(sub, p, depth+1))
			unix.Close(sub)
			continue
		}
		keep(s.file(fd, name, p, depth))
	}
	return first
}

// file normalises one regular file through an O_PATH handle (a file the
// plugin made unreadable, mode 0000, still gets its mode fixed).
func (s *sanitizer) file(dfd int, name, p string, depth int) error {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return s.remove(dfd, name, p, depth)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return s.remove(dfd, name, p, depth)
	}
	if err := unix.Fchownat(fd, "", s.uid, s.gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%s: %w", p, err)
	}
	mode := uint32(outFileMode)
	if st.Mode&0o111 != 0 {
		mode = outExecMode
	}
	// chmod through the handle: /proc/self/fd/N names exactly this inode.
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

// remove deletes name (with everything below it when it is a directory)
// from the directory dfd, without following links.
func (s *sanitizer) remove(dfd int, name, p string, depth int) error {
	err := unix.Unlinkat(dfd, name, 0)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
		err = s.removeDir(dfd, name, depth)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	s.removed = append(s.removed, p)
	return nil
}

func (s *sanitizer) removeDir(dfd int, name string, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nested deeper than %d directories", maxDepth)
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_ = unix.Fchown(fd, s.uid, s.gid)
	_ = unix.Fchmod(fd, 0o700)
	names, err := readNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := unix.Unlinkat(fd, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			if err := s.removeDir(fd, n, depth+1); err != nil {
				return err
			}
		}
	}
	return unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
}

// readNames lists a directory handle's entries (without . and ..).
func readNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	return f.Readdirnames(-1)
}

// cleanName: UTF-8 without control characters (ESC, newline, DEL, C1).
func cleanName(name string) bool {
	if !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}
