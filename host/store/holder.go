package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// HolderFile is the file, inside the database directory, that names the
// process holding the database open. It is written after badger's
// directory lock is taken and removed before it is released, so whoever
// fails to take the lock finds the holder's record there.
const HolderFile = "fluffy-holder.json"

// Holder says who holds a database open.
type Holder struct {
	// PID and Host identify the process. In an L1 kernel container Host is
	// the container's hostname (its short id) and PID is the pid inside it.
	PID  int    `json:"pid"`
	Host string `json:"host,omitempty"`
	// Project is the project the process serves ("" when none, e.g. the
	// plugin CLI on the home database).
	Project string `json:"project,omitempty"`
	// Command is what the process is, e.g. "fluffy kernel".
	Command string    `json:"command,omitempty"`
	Since   time.Time `json:"since"`
}

// maxHolderBytes bounds what is read back: the file is ours, but a
// damaged or planted one must not make an error message unbounded.
const maxHolderBytes = 4 << 10

func writeHolder(dir string, h Holder, now func() time.Time) {
	h.PID = os.Getpid()
	h.Host, _ = os.Hostname()
	h.Since = now().UTC()
	if h.Command == "" {
		h.Command = filepath.Base(os.Args[0])
	}
	b, err := json.Marshal(h)
	if err != nil {
		return
	}
	// Best effort: the record only explains a lock error; failing to
	// write it must not fail the open.
	_ = atomicfile.Replace(atomicfile.OS{}, filepath.Join(dir, HolderFile), 0o600, atomicfile.Options{NoSync: true}, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// removeHolder removes the holder record if it is this process's.
func removeHolder(dir string) {
	h, err := ReadHolder(dir)
	if err != nil || h.PID != os.Getpid() {
		return
	}
	if host, _ := os.Hostname(); h.Host != host {
		return
	}
	_ = os.Remove(filepath.Join(dir, HolderFile))
}

// ReadHolder reads the holder record of the database in dir. When there is
// none (a fluffy older than the record, or a process that is not fluffy)
// it falls back to the pid badger writes into its LOCK file.
func ReadHolder(dir string) (Holder, error) {
	b, err := readBounded(filepath.Join(dir, HolderFile))
	if err == nil {
		var h Holder
		if err := json.Unmarshal(b, &h); err == nil && h.PID > 0 {
			return h, nil
		}
	}
	lb, lerr := readBounded(filepath.Join(dir, "LOCK"))
	if lerr != nil {
		if err == nil {
			err = lerr
		}
		return Holder{}, err
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(lb)))
	if perr != nil || pid <= 0 {
		return Holder{}, errors.New("no holder record and no pid in badger's LOCK file")
	}
	return Holder{PID: pid}, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, maxHolderBytes)
	n, err := f.Read(b)
	if n == 0 && err != nil {
		return nil, err
	}
	return b[:n], nil
}

// describe is the holder for an error message: "fluffy kernel (pid 12,
// project /p, in container abc) since 21:30:01 UTC".
func (h Holder) describe() string {
	var b strings.Builder
	cmd := h.Command
	if cmd == "" {
		cmd = "a process"
	}
	b.WriteString(textsafe.Line(cmd, 80))
	fmt.Fprintf(&b, " (pid %d", h.PID)
	if h.Project != "" {
		b.WriteString(", project " + textsafe.Line(h.Project, 512))
	}
	if host, _ := os.Hostname(); h.Host != "" && h.Host != host {
		b.WriteString(", on host or container " + textsafe.Line(h.Host, 64))
	}
	b.WriteString(")")
	if !h.Since.IsZero() {
		b.WriteString(" since " + h.Since.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	return b.String()
}

// lockedErr is the STORE_LOCKED error for dir, naming its holder and how to
// get it released.
func lockedErr(dir, label string, cause error, waited time.Duration) error {
	shown := dir
	if abs, err := filepath.Abs(dir); err == nil {
		shown = abs
	}
	what := fmt.Sprintf("the %s is in use: %s", label, textsafe.Line(shown, 1024))
	why := "another process holds its lock"
	fix := "wait for the other process to finish, or stop it"
	h, herr := ReadHolder(dir)
	if herr == nil {
		why = h.describe() + " holds its lock"
		switch {
		case h.Project != "" && strings.Contains(h.Command, "kernel"):
			fix = fmt.Sprintf("wait for it to finish, or stop that project's kernel: `fluffy kernel stop --project %s`", textsafe.Line(h.Project, 512))
		default:
			fix = fmt.Sprintf("wait for it to finish, or stop process %d", h.PID)
		}
	}
	if waited > 0 {
		why += fmt.Sprintf(" (waited %s for it)", waited.Round(time.Millisecond))
	}
	return uerr.Wrap(cause, CodeLocked, what, why, fix)
}
