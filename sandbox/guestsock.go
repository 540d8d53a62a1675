package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// guestSock is the kernel's way into a container's socket directory when
// that directory is a tmpfs of sockQuotaBytes in the container (not a host
// bind mount): the plugin's writes there stop at ENOSPC in its own memory
// and never reach the host disk. The kernel reaches the plugin's socket
// through the container's /proc/PID/root, opened once while its init runs
// (the container runs as the kernel's uid, or the kernel is root, so the
// kernel may open it); the handles keep naming that container's
// filesystems whatever later reuses the pid.
type guestSock struct {
	root *os.File // the container's "/" (O_PATH)
	dir  *os.File // its socket directory, a tmpfs of sockQuotaBytes
	// dials are the O_PATH handles of sockets the kernel was told to dial:
	// go-plugin connects through /proc/self/fd/N, which names that very
	// socket, never a link the plugin planted.
	dials []*os.File
}

// guestResolve keeps every lookup below a handle: no symlink, no magic
// link, no ".." above it.
const guestResolve = unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openGuestSock opens the socket directory of the container whose init
// is pid. The pid is the engine's answer, so it is checked against the
// container: its cgroup must name the container id (an engine in a VM or
// another pid namespace reports a pid that is not ours), and the
// directory must be the tmpfs the kernel asked for (a runtime such as
// gVisor keeps its mounts away from the host's /proc).
//
// The plugin must not be able to make the kernel give up the tmpfs for
// later containers, so only what it cannot change counts against the
// engine: an error wrapping errGuestRefused is the container's own doing
// (its init, running as uid, made itself undumpable), one wrapping
// errGuestGone means pid is no process here (it ended, or the engine's
// pids are not this machine's: the caller asks the engine again).
func openGuestSock(pid int64, containerID string, uid int) (*guestSock, error) {
	if pid <= 1 || len(containerID) < 12 {
		return nil, fmt.Errorf("the engine reports no pid (%d) for container %s", pid, shortID(containerID))
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("process %d of container %s: %w", pid, shortID(containerID), errGuestGone)
	}
	if err != nil || !strings.Contains(string(cg), containerID) {
		return nil, fmt.Errorf("process %d is not container %s (the engine runs in another pid namespace or machine): %v", pid, shortID(containerID), err)
	}
	rfd, err := unix.Open(fmt.Sprintf("/proc/%d/root", pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) && procUID(pid) == uid {
		return nil, fmt.Errorf("open the container's root through /proc/%d/root: %w (%w)", pid, err, errGuestRefused)
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("process %d of container %s: %w", pid, shortID(containerID), errGuestGone)
	}
	if err != nil {
		return nil, fmt.Errorf("open the container's root through /proc/%d/root: %w", pid, err)
	}
	root := os.NewFile(uintptr(rfd), "container root")
	// Again after the root was opened: if pid was another process's when
	// it was opened, it is not this container's now either.
	if !inContainer(pid, containerID) {
		root.Close()
		return nil, fmt.Errorf("process %d left container %s while its root was opened", pid, shortID(containerID))
	}
	dfd, err := unix.Openat2(rfd, strings.TrimPrefix(GuestSocketDir, "/"), &unix.OpenHow{
		Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: guestResolve})
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("open the container's %s: %w", GuestSocketDir, err)
	}
	dir := os.NewFile(uintptr(dfd), GuestSocketDir)
	var st unix.Statfs_t
	if err := unix.Fstatfs(dfd, &st); err != nil || st.Type != unix.TMPFS_MAGIC || int64(st.Blocks)*st.Bsize > sockQuotaBytes {
		dir.Close()
		root.Close()
		return nil, fmt.Errorf("the container's %s is not a tmpfs of %d bytes (type %#x, %d bytes): %v", GuestSocketDir, sockQuotaBytes, st.Type, int64(st.Blocks)*st.Bsize, err)
	}
	return &guestSock{root: root, dir: dir}, nil
}

// errGuestRefused: the container's init refused the kernel its root.
var errGuestRefused = errors.New("the sandboxed process does not let the kernel into its filesystem")

// errGuestGone: the container's pid names no process here.
var errGuestGone = errors.New("no such process here")

// procUID is the real uid process pid runs as, -1 if unknown.
func procUID(pid int64) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			if n, err := strconv.Atoi(f[1]); err == nil {
				return n
			}
		}
	}
	return -1
}

// inContainer says whether process pid is in the cgroup of the container
// (its path names the container id under every cgroup driver). A process
// cannot change what its cgroup file says.
func inContainer(pid int64, containerID string) bool {
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && strings.Contains(string(cg), containerID)
}

// dial returns the address go-plugin dials for the socket the plugin
// advertised as name in its socket directory: a handle on that socket,
// refused if name is anything but a socket.
func (g *guestSock) dial(name string) (string, error) {
	fd, err := unix.Openat2(int(g.dir.Fd()), name, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
	if err != nil {
		return "", fmt.Errorf("open the advertised socket %s: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		unix.Close(fd)
		return "", fmt.Errorf("the advertised %s/%s is not a socket (mode %o): %v", GuestSocketDir, name, st.Mode, err)
	}
	f := os.NewFile(uintptr(fd), name)
	g.dials = append(g.dials, f)
	return fmt.Sprintf("/proc/self/fd/%d", fd), nil
}

// full reports whether the plugin filled its socket directory: less than
// a page left, so its last write there failed with ENOSPC.
func (g *guestSock) full() bool {
	var st unix.Statfs_t
	return unix.Fstatfs(int(g.dir.Fd()), &st) == nil && int64(st.Bavail)*st.Bsize < outPage
}

func (g *guestSock) close() error {
	errs := []error{g.dir.Close(), g.root.Close()}
	for _, f := range g.dials {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
