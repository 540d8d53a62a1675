package sandbox

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"strconv"
	"sync"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// bwrapSizedTmpfs reports whether this bubblewrap can mount a tmpfs of a
// given size (--size, bubblewrap 0.7 and later).
func bwrapSizedTmpfs(bwrap string) bool {
	probe := exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		"--size", strconv.Itoa(outPage), "--tmpfs", "/tmp", "true")
	return probe.Run() == nil
}

// bwrapJail is what the kernel knows of a running jail from outside:
// bwrap reports the jail's pid on --info-fd and holds the jail on
// --block-fd until the kernel has linked the host's socket directory path
// to the jail's socket tmpfs (/proc/PID/root/<dir>), so go-plugin dials
// the plugin's socket at the address it advertises; the tmpfs, not the
// host disk, holds what the plugin writes there.
type bwrapJail struct {
	dir           string // the socket directory's path, in the jail and on the host
	infoR, infoW  *os.File
	blockR, block *os.File
	ready         chan struct{}
	pid           int
	err           error
}

func newBwrapJail(dir string) (*bwrapJail, error) {
	ir, iw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("bwrap info pipe: %w", err)
	}
	br, bw, err := os.Pipe()
	if err != nil {
		ir.Close()
		iw.Close()
		return nil, fmt.Errorf("bwrap block pipe: %w", err)
	}
	return &bwrapJail{dir: dir, infoR: ir, infoW: iw, blockR: br, block: bw, ready: make(chan struct{})}, nil
}

// start waits, in the background, for bwrap to report the jail, links the
// socket directory and lets the jail run the plugin.
func (j *bwrapJail) start() {
	go func() {
		defer close(j.ready)
		var info struct {
			Pid int `json:"child-pid"`
		}
		if err := json.NewDecoder(j.infoR).Decode(&info); err != nil || info.Pid <= 1 {
			j.err = fmt.Errorf("bubblewrap did not report its sandbox's pid: %v", err)
			return
		}
		j.pid = info.Pid
		if err := os.Symlink(fmt.Sprintf("/proc/%d/root%s", info.Pid, j.dir), j.dir); err != nil {
			j.err = fmt.Errorf("link the sandbox's socket directory: %w", err)
			return
		}
		_, j.err = j.block.Write([]byte{1})
	}()
}

// jailPath is path inside the jail as the kernel reaches it.
func (j *bwrapJail) jailPath(path string) (string, error) {
	<-j.ready
	if j.err != nil {
		return "", j.err
	}
	return fmt.Sprintf("/proc/%d/root%s", j.pid, path), nil
}

func (j *bwrapJail) close() {
	for _, f := range []*os.File{j.infoR, j.infoW, j.blockR, j.block} {
		_ = f.Close()
	}
}

// bwrapOut checks a bwrap sandbox's tmpfs after each call. Its /out, when
// it is a tmpfs of its limit in the jail (hostOut set), is copied through
// the jail's /proc/PID/root into the host OutDir, at most the limit,
// exactly as the Docker launcher copies its /out volume; a full /out or
// a full socket directory stops the sandbox with SANDBOX_QUOTA_EXCEEDED.
// The plugin's writes past either limit fail with ENOSPC in the jail and
// never reach the host.
type bwrapOut struct {
	name    string
	limits  Limits
	hostOut string
	sockDir string
	q       *bwrapQuota
	kill    context.CancelFunc
	log     hclog.Logger
	jail    *bwrapJail

	mu   sync.Mutex
	root *os.Root // the jail's /out, opened at the first copy
	sock *os.File // the jail's socket directory, opened at the first check
}

// collect checks the socket directory and copies the jail's /out to the
// host OutDir. A full one stops the sandbox, empties the host OutDir and
// returns SANDBOX_QUOTA_EXCEEDED.
func (o *bwrapOut) collect(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.q.status(); s.Quota != "" {
		return exitError(o.name, o.limits, rt.Exit{}, false, s.Quota)
	}
	if err := o.open(); err != nil {
		return fmt.Errorf("sandbox %s: %w", o.name, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(o.sock.Fd()), &st); err == nil && int64(st.Bavail)*st.Bsize < outPage {
		q := overQuota{what: o.sockDir + " (its socket directory)", dir: o.sockDir, used: sockQuotaBytes, limit: sockQuotaBytes, full: true}
		return o.over(q)
	}
	if o.root == nil {
		return nil
	}
	pr, pw := io.Pipe()
	var skipped int
	go func() { pw.CloseWithError(tarDir(o.root, pw, quotaMaxEntries+1, &skipped)) }()
	res, err := copyOut(pr, o.hostOut, o.limits.OutBytes)
	pr.CloseWithError(errors.New("copy ended"))
	if skipped > 0 {
		o.log.Warn("not copied from a plugin's /out: neither a regular file nor a directory", "plugin", o.name, "entries", skipped)
	}
	if !res.over {
		if err != nil {
			return fmt.Errorf("sandbox %s: copy /out: %w", o.name, err)
		}
		return nil
	}
	return o.over(overQuota{what: GuestOut, dir: o.hostOut, used: res.used, limit: o.limits.OutBytes, entries: res.entries, max: quotaMaxEntries, full: true})
}

// open opens the jail's socket directory and /out once, while the plugin
// runs (a call just returned): the handles keep naming that jail's
// filesystems, whatever later reuses its pid.
func (o *bwrapOut) open() error {
	if o.sock != nil {
		return nil
	}
	p, err := o.jail.jailPath(o.sockDir)
	if err != nil {
		return err
	}
	sock, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("open its socket directory: %w", err)
	}
	if o.hostOut != "" {
		op, _ := o.jail.jailPath(GuestOut)
		root, err := os.OpenRoot(op)
		if err != nil {
			sock.Close()
			return fmt.Errorf("read /out: %w", err)
		}
		o.root = root
	}
	o.sock = sock
	return nil
}

// over stops the sandbox for q and empties the host OutDir.
func (o *bwrapOut) over(q overQuota) error {
	o.q.stop(q, o.kill, o.hostOut, "")
	if q.dir != o.hostOut && o.hostOut != "" {
		if err := emptyDir(o.hostOut); err != nil {
			o.log.Warn("discarding an output over its quota", "dir", o.hostOut, "error", err)
		}
	}
	o.closeFiles()
	return exitError(o.name, o.limits, rt.Exit{}, false, q.String())
}

func (o *bwrapOut) closeFiles() {
	if o.root != nil {
		_ = o.root.Close() // the last handles on the jail's tmpfs
		o.root = nil
	}
	if o.sock != nil {
		_ = o.sock.Close()
		o.sock = nil
	}
}

func (o *bwrapOut) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closeFiles()
}

// tarDir writes the tree under root as a tar archive whose top directory
// is "out" (what copyOut reads): directories and regular files only (the
// others are counted in skipped), at most maxEntries entries. A file is
// read through the handle it was measured on; one that shrank while it
// was read is padded with zeros, one that grew is cut at its measured size.
func tarDir(root *os.Root, w io.Writer, maxEntries int, skipped *int) error {
	tw := tar.NewWriter(w)
	n := 0
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if n++; n > maxEntries {
			return fs.SkipAll
		}
		name := path.Join("out", p)
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o770})
		case d.Type().IsRegular():
			return tarFile(root, tw, p, name)
		default:
			*skipped++
			return nil
		}
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

func tarFile(root *os.Root, tw *tar.Writer, p, name string) error {
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return nil // removed, or replaced by a link, since the walk saw it
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	c, err := io.Copy(tw, io.LimitReader(f, fi.Size()))
	if err != nil {
		return err
	}
	if c < fi.Size() {
		_, err = io.CopyN(tw, zeros{}, fi.Size()-c)
	}
	return err
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}
