// Package landlock is the confining launcher of the builtin plugins that
// run project code (tool-test, tool-shell): a plugin binary re-executes
// itself with Arg, and Main restricts writes with Landlock to one scratch
// directory (plus /dev files and the coverage outputs the go command names)
// before exec'ing the program, which inherits the restriction.
//
// It owns only that restriction and the scratch environment; it must not
// decide what runs or read what the program prints.
package landlock

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Arg is the first argument that makes a plugin binary a confining
// launcher instead of a plugin: `<plugin> __fluffy_confine <scratch> <prog> args...`.
const Arg = "__fluffy_confine"

// FailedMarker is the file Main writes into the scratch directory when it
// cannot confine or start the program: a runner must then report its own
// failure, never the program's.
const FailedMarker = "confine-failed"

// Landlock write rights by ABI version. Reading and executing are not
// handled, so they stay allowed everywhere the sandbox allows them.
const (
	llWriteV1 = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM
	llFileRights = unix.LANDLOCK_ACCESS_FS_WRITE_FILE
)

// ABI returns the kernel's Landlock ABI version, 0 when Landlock
// is unavailable (old kernel, disabled, or the syscall filtered).
func ABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// Command is the argv prefix that runs a program confined: self is the
// plugin's own binary, scratch the run's scratch directory (absolute).
func Command(self, scratch string) []string {
	return []string{self, Arg, scratch}
}

// Main is the confine mode's main: args are <scratch> <prog>
// [args...]. It restricts writes to scratch (plus the coverage files the
// go command asks a test binary to write) and exec's prog. It never
// returns on success; on failure it prints why and exits 126, and the
// runner reports the run as runner_error.
func Main(args []string) {
	if err := confineAndExec(args); err != nil {
		fmt.Fprintf(os.Stderr, "fluffy confine: %v\n", err)
		if len(args) > 0 && filepath.IsAbs(args[0]) {
			_ = os.WriteFile(filepath.Join(args[0], FailedMarker), []byte(err.Error()), 0o644)
		}
		os.Exit(126)
	}
}

func confineAndExec(args []string) error {
	if len(args) < 2 {
		return errors.New("usage: confine <scratch dir> <program> [args...]")
	}
	scratch, argv := args[0], args[1:]
	if !filepath.IsAbs(scratch) {
		return fmt.Errorf("scratch dir %q is not absolute", scratch)
	}
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	env := confinedEnv(os.Environ(), scratch)
	abi := ABI()
	if abi == 0 {
		// The runner only hands out the build cache when Landlock works
		// (see tool-test's buildCache); without it the run is cold and nothing it
		// can reach outlives the sandbox's own /tmp.
		return syscall.Exec(prog, argv, env)
	}
	var dirs, files []string
	dirs = append(dirs, scratch)
	for _, a := range argv[1:] {
		// The go command asks a test binary to write coverage into its
		// own per-package work directory: a file and a directory it made
		// for that purpose alone.
		if v, ok := strings.CutPrefix(a, "-test.coverprofile="); ok {
			files = append(files, v)
		}
		if v, ok := strings.CutPrefix(a, "-test.gocoverdir="); ok {
			dirs = append(dirs, v)
		}
	}
	for _, f := range files {
		fh, err := os.OpenFile(f, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("coverage file: %w", err)
		}
		fh.Close()
	}
	runtime.LockOSThread() // the ruleset binds this thread, which exec's
	if err := landlockRestrict(abi, dirs, files); err != nil {
		return err
	}
	return syscall.Exec(prog, argv, env)
}

// confinedEnv points everything a test might write (temp files, a nested
// go build's cache, HOME) into the scratch directory and drops the build
// cache's location.
func confinedEnv(env []string, scratch string) []string {
	drop := map[string]bool{"TMPDIR": true, "HOME": true, "GOCACHE": true, "XDG_CACHE_HOME": true, "GOTMPDIR": true, "FLUFFY_BUILD_CACHE": true,
		"GOCACHEPROG": true, "FLUFFY_HOST_GOCACHE": true}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] {
			out = append(out, kv)
		}
	}
	tmp := filepath.Join(scratch, "tmp")
	home := filepath.Join(scratch, "home")
	for _, d := range []string{tmp, home} {
		_ = os.MkdirAll(d, 0o755)
	}
	return append(out, "TMPDIR="+tmp, "HOME="+home, "GOCACHE="+filepath.Join(scratch, "gocache"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
}

func landlockRestrict(abi int, dirs, files []string) error {
	handled := uint64(llWriteV1)
	if abi >= 2 {
		handled |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	fileRights := uint64(llFileRights)
	if abi >= 3 {
		handled |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
		fileRights |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	// Only the first field (ABI 1's whole struct): every kernel with
	// Landlock accepts it, newer ones zero-extend it.
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handled}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr.Handled_access_fs), 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	rs := int(fd)
	defer unix.Close(rs)
	add := func(path string, rights uint64) error {
		pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("landlock rule for %s: %w", path, err)
		}
		defer unix.Close(pfd)
		pb := unix.LandlockPathBeneathAttr{Allowed_access: rights, Parent_fd: int32(pfd)}
		if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0); e != 0 {
			return fmt.Errorf("landlock rule for %s: %w", path, e)
		}
		return nil
	}
	for _, d := range dirs {
		if err := add(d, handled); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := add(f, fileRights); err != nil {
			return err
		}
	}
	// /dev/null, /dev/tty and friends stay writable (no new nodes there).
	if err := add("/dev", fileRights); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs), 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}
