package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Lease marks a kernel instance as alive: the kernel holds an exclusive
// flock on <runDir>/<kernelID>/lease for as long as it runs. The lock dies
// with the process (even on SIGKILL), which is what makes reaping safe:
// pids get reused, flocks do not outlive their holder.
type Lease struct {
	KernelID string
	// Owner identifies the run directory (one per $FLUFFY_HOME) the lease
	// lives in. Every container and volume carries it as a label, and a
	// reaper only ever judges resources of its own owner: another home's
	// leases are not visible here, so their liveness cannot be proven dead.
	Owner string
	// Dir is this kernel's run directory (socket and jail directories live
	// under it and are removed when the kernel is reaped).
	Dir string
	f   *os.File
}

// NewKernelID returns a fresh random kernel instance id.
func NewKernelID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "k" + hex.EncodeToString(b[:])
}

func validKernelID(id string) bool {
	return id != "" && !strings.ContainsAny(id, "/\\.") && len(id) < 64
}

// AcquireLease creates runDir/<kernelID>/ and locks its lease file.
func AcquireLease(runDir, kernelID string) (*Lease, error) {
	if !validKernelID(kernelID) {
		return nil, fmt.Errorf("acquire kernel lease: invalid kernel id %q", kernelID)
	}
	owner, err := RunDirOwner(runDir)
	if err != nil {
		return nil, fmt.Errorf("acquire kernel lease: %w", err)
	}
	dir := filepath.Join(runDir, kernelID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("acquire kernel lease: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lease"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("acquire kernel lease: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("acquire kernel lease %s: already held: %w", kernelID, err)
	}
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	return &Lease{KernelID: kernelID, Owner: owner, Dir: dir, f: f}, nil
}

// ownerFile holds a run directory's owner id.
const ownerFile = "owner"

// RunDirOwner returns the owner id of runDir, creating runDir and the id on
// first use. The id is random rather than derived from the path: two homes
// at the same path (two machines, two L1 containers) sharing one engine
// must still be told apart.
func RunDirOwner(runDir string) (string, error) {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return "", fmt.Errorf("run dir %s: %w", runDir, err)
	}
	p := filepath.Join(runDir, ownerFile)
	for range 3 {
		b, err := os.ReadFile(p)
		if err == nil {
			id := strings.TrimSpace(string(b))
			if !validOwner(id) {
				return "", fmt.Errorf("run dir owner file %s is damaged (%q); remove it when no fluffy kernel of this home runs", p, id)
			}
			return id, nil
		}
		if !os.IsNotExist(err) {
			return "", fmt.Errorf("read %s: %w", p, err)
		}
		var r [12]byte
		_, _ = rand.Read(r[:])
		id := "o" + hex.EncodeToString(r[:])
		// Written to a temp file and linked into place so a concurrent
		// reader never sees a partial id; the loser of a race reads the
		// winner's id on the next round.
		tmp, err := os.CreateTemp(runDir, ".owner-*")
		if err != nil {
			return "", fmt.Errorf("create owner id: %w", err)
		}
		_, werr := tmp.WriteString(id + "\n")
		cerr := tmp.Close()
		if werr == nil && cerr == nil {
			if err := os.Link(tmp.Name(), p); err != nil && !os.IsExist(err) {
				_ = os.Remove(tmp.Name())
				return "", fmt.Errorf("create owner id: %w", err)
			}
		}
		_ = os.Remove(tmp.Name())
	}
	return "", fmt.Errorf("create owner id in %s: lost the race three times", runDir)
}

func validOwner(id string) bool {
	if len(id) != 25 || id[0] != 'o' {
		return false
	}
	_, err := hex.DecodeString(id[1:])
	return err == nil
}

// Release unlocks the lease and removes the kernel's run directory.
func (l *Lease) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := os.RemoveAll(l.Dir)
	_ = l.f.Close()
	l.f = nil
	return err
}

// KernelAlive reports whether the kernel instance holds its lease under
// runDir. A kernel without a run directory counts as dead.
func KernelAlive(runDir, kernelID string) bool {
	if !validKernelID(kernelID) {
		return false
	}
	f, err := os.OpenFile(filepath.Join(runDir, kernelID, "lease"), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// maxRunDirLen bounds a kernel run directory: go-plugin's sockets live at
// <run>/<kernel id>/{sock,jail}/<dir>/pluginNNNNNNNNN, and a unix socket
// path may not exceed 108 bytes.
const maxRunDirLen = 48

// CheckRunDir refuses a run directory whose plugin sockets would not fit
// the unix socket path limit, up front and with a fix, instead of failing
// obscurely at the first plugin start.
func CheckRunDir(runDir string) error {
	if len(runDir) <= maxRunDirLen {
		return nil
	}
	return uerr.New("HOME_PATH_TOO_LONG", "fluffy's home directory path is too long for its sockets",
		fmt.Sprintf("%s is %d bytes; plugin sockets below it would pass the 108-byte unix socket limit", runDir, len(runDir)),
		"set FLUFFY_HOME to a shorter path, e.g. ~/.fluffy")
}
