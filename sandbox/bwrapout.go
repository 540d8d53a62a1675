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

	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// bwrapSizedTmpfs reports whether this bubblewrap can mount a tmpfs of a
// given size (--size, bubblewrap 0.7 and later).
func bwrapSizedTmpfs(bwrap string) bool {
	probe := exec.Command(bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		"--size", strconv.Itoa(outPage), "--tmpfs", "/tmp", "true")
	return probe.Run() == nil
}

// bwrapOut is a bwrap sandbox's /out when it is a tmpfs of its limit in
// the jail's own mount namespace: the plugin's writes past the limit fail
// with ENOSPC there, and nothing reaches the host until collect copies it
// (through the jail's /proc/PID/root) into the host OutDir, at most the
// limit, exactly as the Docker launcher copies its /out volume.
type bwrapOut struct {
	name    string
	limits  Limits
	hostOut string
	q       *bwrapQuota
	kill    context.CancelFunc
	log     hclog.Logger

	// info is the read end of bwrap's --info-fd ({"child-pid": N}).
	info    *os.File
	infoW   *os.File
	mu      sync.Mutex
	pid     int
	pidErr  error
	root    *os.Root // the jail's /out, opened at the first copy
	pidOnce sync.Once
}

func newBwrapOut(name string, limits Limits, hostOut string, q *bwrapQuota, kill context.CancelFunc, log hclog.Logger) (*bwrapOut, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("bwrap info pipe: %w", err)
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &bwrapOut{name: name, limits: limits, hostOut: hostOut, q: q, kill: kill, log: log, info: r, infoW: w}, nil
}

// childPid is the jail's first process, as bwrap reported it.
func (o *bwrapOut) childPid() (int, error) {
	o.pidOnce.Do(func() {
		// bwrap wrote its info when it created the jail; the write end
		// the kernel holds is closed so a bwrap that died without
		// writing ends the read.
		_ = o.infoW.Close()
		var info struct {
			Pid int `json:"child-pid"`
		}
		if err := json.NewDecoder(o.info).Decode(&info); err != nil || info.Pid <= 1 {
			o.pidErr = fmt.Errorf("bubblewrap did not report its sandbox's pid: %v", err)
			return
		}
		o.pid = info.Pid
	})
	return o.pid, o.pidErr
}

// collect copies the jail's /out to the host OutDir. A full /out stops
// the sandbox, empties the host OutDir and returns SANDBOX_QUOTA_EXCEEDED.
func (o *bwrapOut) collect(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.q.status(); s.Quota != "" {
		return exitError(o.name, o.limits, rt.Exit{}, false, s.Quota)
	}
	if o.root == nil {
		pid, err := o.childPid()
		if err != nil {
			return fmt.Errorf("sandbox %s: read /out: %w", o.name, err)
		}
		root, err := os.OpenRoot(fmt.Sprintf("/proc/%d/root%s", pid, GuestOut))
		if err != nil {
			return fmt.Errorf("sandbox %s: read /out: %w", o.name, err)
		}
		o.root = root
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
	q := overQuota{what: GuestOut, dir: o.hostOut, used: res.used, limit: o.limits.OutBytes, entries: res.entries, max: quotaMaxEntries, full: true}
	o.q.stop(q, o.kill, o.hostOut, "")
	o.closeRoot()
	return exitError(o.name, o.limits, rt.Exit{}, false, q.String())
}

func (o *bwrapOut) closeRoot() {
	if o.root != nil {
		_ = o.root.Close() // the last handle on the jail's tmpfs
		o.root = nil
	}
}

func (o *bwrapOut) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closeRoot()
	_ = o.info.Close()
	_ = o.infoW.Close()
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
