package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fluffy-waffle/fluffy/lib/confine"
)

// Identity is the uid/gid a sandboxed plugin reads its view as. A project
// file it can read through its own mode bits is hard-linked into the view;
// any other (a 0600 file of the user's when the sandbox runs as 65532) is
// copied, so that a file the policy allows is readable whoever runs the
// sandbox, and nothing the policy denies is ever placed.
type Identity struct{ UID, GID int }

func (id Identity) canRead(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	m := fi.Mode().Perm()
	switch {
	case int(st.Uid) == id.UID:
		return m&0o400 != 0
	case int(st.Gid) == id.GID:
		return m&0o040 != 0
	}
	return m&0o004 != 0
}

// overlayEntry is one changeset path as a view shows it.
type overlayEntry struct {
	Delete bool
	Blob   string // content sha256: the file name in the session's blob directory
	Exec   bool
}

func (o overlayEntry) blobName() string {
	if o.Exec {
		return o.Blob + ".x"
	}
	return o.Blob
}

// overlay is the changeset as of one version.
type overlay struct {
	version uint64
	files   map[string]overlayEntry
}

// RefreshStats say what one refresh did (logs, benchmarks, tests).
type RefreshStats struct {
	DirsChecked, DirsScanned int
	Linked, Copied, Blobs    int
	Symlinks, Removed, Kept  int
	Judged                   int
	Duration                 time.Duration
}

// Placement kinds.
const (
	placeLink    = 'l' // hard link to the project file
	placeCopy    = 'c' // private copy of the project file
	placeBlob    = 'b' // hard link to a changeset blob
	placeSymlink = 's' // symlink to a canonical in-view target
)

type placed struct {
	kind   byte
	ino    uint64
	size   int64
	mtime  int64
	ctime  int64
	blob   string // placeBlob: blob file name
	target string // placeSymlink
}

type dirMark struct {
	ino     uint64
	mtime   int64
	exists  bool // the project has this directory (else: only the changeset does)
	recheck bool // modified too recently to trust its mtime next time
	subdirs []string
}

// racyWindow: a directory modified this recently is rescanned on the next
// refresh even if its mtime did not move (timestamps are coarse: a second
// change within the same tick leaves the mtime unchanged).
const racyWindow = 2 * time.Second

// view is one plugin's mirror of project + changeset, filtered by the
// policy. All methods run under mu.
type view struct {
	mu sync.Mutex // held while refreshing
	// gmu guards next: the refresh that callers arriving now will share
	// (see Session.refreshShared).
	gmu     sync.Mutex
	next    *refreshGroup
	dir     string
	project *confine.Root
	blobs   string
	reader  Identity
	now     func() time.Time

	filt   *filter
	marks  map[string]*dirMark
	placed map[string]placed
	copies map[string]struct{}
	ov     overlay
	ovDirs map[string]map[string]bool // dir → child name → is a directory, implied by changeset writes
	tmpSeq int
}

func newView(dir string, project *confine.Root, blobs string, reader Identity, now func() time.Time) (*view, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create view %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("view %s: %w", dir, err)
	}
	return &view{dir: dir, project: project, blobs: blobs, reader: reader, now: now,
		marks: map[string]*dirMark{}, placed: map[string]placed{}, copies: map[string]struct{}{},
		ovDirs: map[string]map[string]bool{}}, nil
}

func statOf(fi fs.FileInfo) (ino uint64, mtime, ctime int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino, st.Mtim.Nano(), st.Ctim.Nano()
	}
	return 0, fi.ModTime().UnixNano(), 0
}

// refresh brings the view up to date with the project, the overlay and the
// filter; only directories whose mtime moved (or that the overlay or a
// filter change touched) are read again.
func (v *view) refresh(ctx context.Context, f *filter, ov overlay) (RefreshStats, error) {
	start := v.now()
	var st RefreshStats
	forceAll := v.filt == nil || v.filt.key != f.key
	if forceAll {
		v.filt = f
	}
	forced := map[string]bool{}
	if ov.version != v.ov.version || forceAll {
		for p, e := range ov.files {
			if old, ok := v.ov.files[p]; !ok || old != e {
				forceAncestors(forced, p)
			}
		}
		for p := range v.ov.files {
			if _, ok := ov.files[p]; !ok {
				forceAncestors(forced, p)
			}
		}
		v.ov = ov
		v.ovDirs = map[string]map[string]bool{}
		for p, e := range ov.files {
			if e.Delete {
				continue
			}
			child, isDir := p, false
			for {
				d := path.Dir(child)
				if d == "." {
					d = ""
				}
				kids := v.ovDirs[d]
				if kids == nil {
					kids = map[string]bool{}
					v.ovDirs[d] = kids
				}
				kids[path.Base(child)] = kids[path.Base(child)] || isDir
				if d == "" {
					break
				}
				child, isDir = d, true
			}
		}
	}
	// Private copies do not share the project file's inode: an in-place
	// edit of the project file is seen only by comparing its stat.
	for rel := range v.copies {
		p := v.placed[rel]
		fi, err := v.project.OS().Lstat(rel)
		if err != nil || !fi.Mode().IsRegular() {
			forceAncestors(forced, rel)
			continue
		}
		ino, mt, ct := statOf(fi)
		if ino != p.ino || mt != p.mtime || ct != p.ctime || fi.Size() != p.size {
			delete(v.placed, rel) // place again
			forceAncestors(forced, rel)
		}
	}
	seen := map[string]bool{}
	queue := []string{""}
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		d := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		seen[d] = true
		st.DirsChecked++
		name := d
		if name == "" {
			name = "."
		}
		fi, err := v.project.OS().Lstat(name)
		exists := err == nil && fi.IsDir()
		var ino uint64
		var mt int64
		if exists {
			ino, mt, _ = statOf(fi)
		}
		m := v.marks[d]
		var subdirs []string
		if forceAll || forced[d] || m == nil || m.recheck || m.exists != exists || m.ino != ino || m.mtime != mt {
			st.DirsScanned++
			subdirs, err = v.reconcile(ctx, d, exists, &st)
			if err != nil {
				return st, err
			}
			recheck := exists && start.Sub(time.Unix(0, mt)) < racyWindow
			v.marks[d] = &dirMark{ino: ino, mtime: mt, exists: exists, recheck: recheck, subdirs: subdirs}
		} else {
			subdirs = m.subdirs
		}
		for _, s := range subdirs {
			queue = append(queue, join(d, s))
		}
	}
	for d := range v.marks {
		if !seen[d] {
			delete(v.marks, d)
		}
	}
	st.Judged = len(v.filt.cache)
	st.Duration = v.now().Sub(start)
	return st, nil
}

func forceAncestors(forced map[string]bool, p string) {
	for {
		d := path.Dir(p)
		if d == "." || d == "/" {
			forced[""] = true
			return
		}
		forced[d] = true
		p = d
	}
}

func join(d, name string) string {
	if d == "" {
		return name
	}
	return d + "/" + name
}

type want struct {
	kind   byte // 'd' dir, or a placement kind (placeLink stands for "project file")
	fi     fs.FileInfo
	blob   string
	target string
}

// reconcile makes view directory d match what it should contain and
// returns its subdirectories.
func (v *view) reconcile(ctx context.Context, d string, projExists bool, st *RefreshStats) ([]string, error) {
	wants := map[string]want{}
	var projDir *os.File
	if projExists {
		name := d
		if name == "" {
			name = "."
		}
		var err error
		if projDir, err = v.project.OS().Open(name); err == nil {
			defer projDir.Close()
			fis, _ := projDir.Readdir(-1)
			for _, fi := range fis {
				rel := join(d, fi.Name())
				if _, inOverlay := v.ov.files[rel]; inOverlay {
					continue
				}
				m := fi.Mode()
				switch {
				case m.IsDir():
					if v.filt.visible(ctx, rel, true) {
						wants[fi.Name()] = want{kind: 'd'}
					}
				case m.IsRegular():
					if v.filt.visible(ctx, rel, false) {
						wants[fi.Name()] = want{kind: placeLink, fi: fi}
					}
				case m&fs.ModeSymlink != 0:
					if t, ok := v.linkTarget(ctx, rel); ok {
						wants[fi.Name()] = want{kind: placeSymlink, target: t}
					}
				}
				// FIFOs, sockets and devices are never shown.
			}
		} else {
			projDir = nil
		}
	}
	for name, isDir := range v.ovDirs[d] {
		rel := join(d, name)
		if isDir {
			if v.filt.visible(ctx, rel, true) {
				wants[name] = want{kind: 'd'}
			}
			continue
		}
		if e, ok := v.ov.files[rel]; ok && !e.Delete && v.filt.visible(ctx, rel, false) {
			wants[name] = want{kind: placeBlob, blob: e.blobName()}
		}
	}

	vname := filepath.Join(v.dir, filepath.FromSlash(d))
	if err := ensureDir(vname); err != nil {
		return nil, err
	}
	viewDir, err := os.Open(vname)
	if err != nil {
		return nil, fmt.Errorf("open view directory: %w", err)
	}
	defer viewDir.Close()
	current := map[string]fs.FileInfo{}
	if fis, err := viewDir.Readdir(-1); err == nil {
		for _, fi := range fis {
			current[fi.Name()] = fi
		}
	}
	for name, fi := range current {
		if _, ok := wants[name]; ok {
			continue
		}
		if err := v.remove(viewDir, d, name, fi); err != nil {
			return nil, err
		}
		st.Removed++
	}
	var subdirs []string
	vfd := int(viewDir.Fd())
	for name, w := range wants {
		rel := join(d, name)
		cur := current[name]
		if w.kind == 'd' {
			if cur != nil && !cur.IsDir() {
				if err := v.remove(viewDir, d, name, cur); err != nil {
					return nil, err
				}
				cur = nil
			}
			if cur == nil {
				if err := unix.Mkdirat(vfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
					return nil, fmt.Errorf("create %s in view: %w", rel, err)
				}
				// The umask may have narrowed it; the sandbox must traverse it.
				_ = unix.Fchmodat(vfd, name, 0o755, 0)
			}
			subdirs = append(subdirs, name)
			continue
		}
		if cur != nil && cur.IsDir() {
			if err := v.remove(viewDir, d, name, cur); err != nil {
				return nil, err
			}
			cur = nil
		}
		if cur != nil && v.fresh(rel, w, cur) {
			st.Kept++
			continue
		}
		var err error
		switch w.kind {
		case placeLink:
			err = v.placeFile(projDir, vfd, rel, name, w.fi, cur != nil, st)
		case placeBlob:
			err = v.placeBlob(vfd, rel, name, w.blob, cur != nil)
			st.Blobs++
		case placeSymlink:
			err = v.placeSymlink(vfd, rel, name, w.target, cur != nil)
			st.Symlinks++
		}
		if err != nil {
			return nil, err
		}
	}
	return subdirs, nil
}

// fresh reports whether the view entry cur already shows w.
func (v *view) fresh(rel string, w want, cur fs.FileInfo) bool {
	p, known := v.placed[rel]
	ino, _, _ := statOf(cur)
	switch w.kind {
	case placeLink:
		srcIno, mt, ct := statOf(w.fi)
		if cur.Mode().IsRegular() && ino == srcIno {
			// The very inode: a hard link (also found after a restart).
			if !known || p.kind != placeLink || p.ino != srcIno {
				v.placed[rel] = placed{kind: placeLink, ino: srcIno}
			}
			return true
		}
		return known && p.kind == placeCopy && p.ino == srcIno && p.mtime == mt && p.ctime == ct && p.size == w.fi.Size()
	case placeBlob:
		return known && p.kind == placeBlob && p.blob == w.blob && cur.Mode().IsRegular()
	case placeSymlink:
		return known && p.kind == placeSymlink && p.target == w.target && cur.Mode()&fs.ModeSymlink != 0
	}
	return false
}

func (v *view) tmpName() string {
	v.tmpSeq++
	return fmt.Sprintf(".fluffy-view-%d.tmp", v.tmpSeq)
}

// install puts a prepared temporary entry in place under name: a rename,
// which replaces an existing entry atomically and never writes through it.
func install(vfd int, tmp, name string) error {
	if err := unix.Renameat(vfd, tmp, vfd, name); err != nil {
		_ = unix.Unlinkat(vfd, tmp, 0)
		return err
	}
	return nil
}

func (v *view) placeFile(projDir *os.File, vfd int, rel, name string, fi fs.FileInfo, replace bool, st *RefreshStats) error {
	if projDir == nil {
		return nil
	}
	srcIno, mt, ct := statOf(fi)
	pfd := int(projDir.Fd())
	if v.reader.canRead(fi) {
		target := name
		if replace {
			target = v.tmpName()
		}
		// linkat without AT_SYMLINK_FOLLOW, from an already confined
		// directory handle: exactly the project's entry, never a link's
		// target.
		err := unix.Linkat(pfd, fi.Name(), vfd, target, 0)
		if err == nil && replace {
			err = install(vfd, target, name)
		}
		if err == nil {
			v.placed[rel] = placed{kind: placeLink, ino: srcIno}
			delete(v.copies, rel)
			st.Linked++
			return nil
		}
		if errors.Is(err, unix.ENOENT) {
			return nil // gone meanwhile; the next refresh sees the directory change
		}
		// EXDEV (another filesystem), EPERM (protected_hardlinks), ...: copy.
	}
	tmp := v.tmpName()
	src, err := openat(pfd, fi.Name(), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return fmt.Errorf("read %s: %w", rel, err)
	}
	defer src.Close()
	if sfi, err := src.Stat(); err != nil || !sfi.Mode().IsRegular() {
		return nil
	}
	mode := uint32(0o644)
	if fi.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	dst, err := openat(vfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, mode)
	if err != nil {
		return fmt.Errorf("copy %s into view: %w", rel, err)
	}
	_, cerr := io.Copy(dst, src)
	_ = dst.Chmod(fs.FileMode(mode))
	if err := dst.Close(); cerr == nil {
		cerr = err
	}
	if cerr == nil {
		cerr = install(vfd, tmp, name)
	} else {
		_ = unix.Unlinkat(vfd, tmp, 0)
	}
	if cerr != nil {
		return fmt.Errorf("copy %s into view: %w", rel, cerr)
	}
	v.placed[rel] = placed{kind: placeCopy, ino: srcIno, size: fi.Size(), mtime: mt, ctime: ct}
	v.copies[rel] = struct{}{}
	st.Copied++
	return nil
}

func (v *view) placeBlob(vfd int, rel, name, blob string, replace bool) error {
	bdir, err := unix.Open(v.blobs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open blob store: %w", err)
	}
	defer unix.Close(bdir)
	tmp := v.tmpName()
	if err := unix.Linkat(bdir, blob, vfd, tmp, 0); err != nil {
		return fmt.Errorf("link changeset content of %s into view: %w", rel, err)
	}
	if err := install(vfd, tmp, name); err != nil {
		return fmt.Errorf("place %s in view: %w", rel, err)
	}
	delete(v.copies, rel)
	v.placed[rel] = placed{kind: placeBlob, blob: blob}
	return nil
}

func (v *view) placeSymlink(vfd int, rel, name, target string, replace bool) error {
	tmp := v.tmpName()
	if err := unix.Symlinkat(target, vfd, tmp); err != nil {
		return fmt.Errorf("link %s in view: %w", rel, err)
	}
	if err := install(vfd, tmp, name); err != nil {
		return fmt.Errorf("place %s in view: %w", rel, err)
	}
	delete(v.copies, rel)
	v.placed[rel] = placed{kind: placeSymlink, target: target}
	return nil
}

// linkTarget decides how a project symlink appears in the view: resolved
// inside the project with the one confinement helper, and shown (as a link
// to the canonical target, relative to its own directory) only when the
// link's own path, its target and every directory above the target are
// visible. A link out of the project, a loop or a dangling link is not
// shown at all.
func (v *view) linkTarget(ctx context.Context, rel string) (string, bool) {
	if !v.filt.visible(ctx, rel, false) {
		return "", false
	}
	canon, err := v.project.Resolve(rel)
	if err != nil || canon == "." {
		return "", false
	}
	fi, err := v.project.OS().Lstat(canon)
	if err != nil {
		return "", false
	}
	for a := path.Dir(canon); a != "."; a = path.Dir(a) {
		if !v.filt.visible(ctx, a, true) {
			return "", false
		}
	}
	if !v.filt.visible(ctx, canon, fi.IsDir()) {
		return "", false
	}
	if e, ok := v.ov.files[canon]; ok && e.Delete {
		return "", false
	}
	from := path.Dir(rel)
	t, err := filepath.Rel(filepath.FromSlash(from), filepath.FromSlash(canon))
	if err != nil {
		return "", false
	}
	return filepath.ToSlash(t), true
}

// remove deletes a view entry (never following it) and forgets what was
// known below it.
func (v *view) remove(viewDir *os.File, d, name string, fi fs.FileInfo) error {
	rel := join(d, name)
	var err error
	if fi.IsDir() {
		err = os.RemoveAll(filepath.Join(v.dir, filepath.FromSlash(rel)))
		prefix := rel + "/"
		for p := range v.placed {
			if strings.HasPrefix(p, prefix) {
				delete(v.placed, p)
				delete(v.copies, p)
			}
		}
	} else {
		err = unix.Unlinkat(int(viewDir.Fd()), name, 0)
		if errors.Is(err, unix.ENOENT) {
			err = nil
		}
	}
	delete(v.placed, rel)
	delete(v.copies, rel)
	if err != nil {
		return fmt.Errorf("remove %s from view: %w", rel, err)
	}
	return nil
}

func ensureDir(p string) error {
	fi, err := os.Lstat(p)
	if err == nil && fi.IsDir() {
		return nil
	}
	if err == nil {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("view %s: %w", p, err)
		}
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("view %s: %w", p, err)
	}
	return os.Chmod(p, 0o755)
}

func openat(dirfd int, name string, flags int, mode ...uint32) (*os.File, error) {
	var m uint32
	if len(mode) > 0 {
		m = mode[0]
	}
	fd, err := unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, m)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}
