package pin

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

// Dir is where the records live, relative to $FLUFFY_HOME.
const Dir = "trust/policies"

// Error codes.
const (
	CodeStore = "POLICY_TRUST_STORE"
)

// maxRecord bounds a record read back (it holds one policy file's text).
const maxRecord = 8 << 20

// maxLoadAttempts bounds how often Load reads again a record that changed
// while the policy file was read.
const maxLoadAttempts = 50

// Approval is one approved content of a project's policy file.
type Approval struct {
	Hash string    `json:"sha256"`
	At   time.Time `json:"at"`
	Via  string    `json:"via"` // "fluffy policy trust", "fluffy policy update", ...
}

// Record is a project's approvals. It normally holds one; two only while a
// reviewed write replaces the file (the old content stays approved until
// the new one is on disk, so a running kernel never sees neither).
type Record struct {
	Project  string     `json:"project"`
	Approved []Approval `json:"approved"`
	// Content is the text of the latest approval, so the next review can
	// show what changed since.
	Content string `json:"content"`
}

// Approves reports whether content with this sha256 is approved.
func (r *Record) Approves(hash string) bool {
	return r != nil && slices.ContainsFunc(r.Approved, func(a Approval) bool { return a.Hash == hash })
}

// Store is the approval records under one $FLUFFY_HOME.
type Store struct{ home string }

// NewStore returns the store of home ($FLUFFY_HOME).
func NewStore(home string) *Store { return &Store{home: home} }

// Hash is the sha256 of content, as records and policies name it.
func Hash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// canonical is the project's absolute path with links resolved: the same
// project reached by two spellings has one record.
func canonical(project string) (string, error) {
	abs, err := filepath.Abs(project)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	return abs, nil
}

func recordName(project string) string { return Hash([]byte(project))[:32] + ".json" }

// Path is the record file of project.
func (s *Store) Path(project string) (string, error) {
	c, err := canonical(project)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.home, Dir, recordName(c)), nil
}

func (s *Store) fail(err error, what string) error {
	return uerr.Wrap(err, CodeStore, what, err.Error(), "check the permissions of "+filepath.Join(s.home, Dir)+" ($FLUFFY_HOME)")
}

// Lookup returns project's record, nil when the project has none.
func (s *Store) Lookup(project string) (*Record, error) {
	if s.home == "" {
		return nil, nil
	}
	path, err := s.Path(project)
	if err != nil {
		return nil, s.fail(err, "cannot name the policy approval record of "+project)
	}
	data, err := s.readRecord(path)
	if err != nil || data == nil {
		return nil, err
	}
	return parseRecord(path, data)
}

// readRecord returns the bytes of the record file at path, nil when there
// is none.
func (s *Store) readRecord(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, s.fail(err, "cannot read the policy approval record "+path)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecord))
	if err != nil {
		return nil, s.fail(err, "cannot read the policy approval record "+path)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

func parseRecord(path string, data []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, uerr.Wrap(err, CodeStore, "the policy approval record "+path+" is damaged", err.Error(),
			"remove it and approve the project's policy again with `fluffy policy trust`")
	}
	return &r, nil
}

// Approve pins content as the one approved version of project's policy file.
func (s *Store) Approve(project string, content []byte, via string) error {
	return s.update(project, content, via, false)
}

// Written pins content and runs write, which puts it in the project's
// policy file: the content is approved before it is on disk and the old one
// stays approved until it is replaced, so a running kernel never sees the
// file unapproved. If write fails the record is restored.
func (s *Store) Written(project string, content []byte, via string, write func() error) error {
	old, err := s.Lookup(project)
	if err != nil {
		return err
	}
	if err := s.update(project, content, via, true); err != nil {
		return err
	}
	if err := write(); err != nil {
		if old != nil {
			_ = s.put(project, old)
		} else {
			_ = s.remove(project)
		}
		return err
	}
	return s.update(project, content, via, false)
}

func (s *Store) update(project string, content []byte, via string, keep bool) error {
	c, err := canonical(project)
	if err != nil {
		return s.fail(err, "cannot name the policy approval record of "+project)
	}
	r := &Record{Project: c}
	if keep {
		old, err := s.Lookup(project)
		if err != nil {
			return err
		}
		if old != nil {
			r.Approved = old.Approved
		}
	}
	h := Hash(content)
	if !r.Approves(h) {
		r.Approved = append(r.Approved, Approval{Hash: h, At: time.Now().UTC(), Via: via})
	}
	r.Content = string(content)
	return s.put(project, r)
}

// dir opens $FLUFFY_HOME/trust/policies, creating it (0700) without
// following any link below $FLUFFY_HOME.
func (s *Store) dir() (*os.File, error) {
	if s.home == "" {
		return nil, uerr.New(CodeStore, "no $FLUFFY_HOME to keep the policy approval in", "approvals are kept per user, in $FLUFFY_HOME", "set FLUFFY_HOME or HOME")
	}
	if err := os.MkdirAll(s.home, 0o700); err != nil {
		return nil, s.fail(err, "cannot create "+s.home)
	}
	d, err := confine.MkdirAll(s.home, Dir, 0o700)
	if err != nil {
		return nil, s.fail(err, "cannot create "+filepath.Join(s.home, Dir))
	}
	return d, nil
}

// put writes r atomically: a temp file created 0600 with O_EXCL|O_NOFOLLOW
// in the directory, synced, renamed over the record.
func (s *Store) put(project string, r *Record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	d, err := s.dir()
	if err != nil {
		return err
	}
	defer d.Close()
	c, err := canonical(project)
	if err != nil {
		return s.fail(err, "cannot name the policy approval record of "+project)
	}
	name := recordName(c)
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + name + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	dfd := int(d.Fd())
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return s.fail(err, "cannot write the policy approval record")
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.Name(), tmp))
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Renameat(dfd, tmp, dfd, name)
	}
	if werr != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return s.fail(werr, "cannot write the policy approval record "+filepath.Join(d.Name(), name))
	}
	_ = d.Sync()
	return nil
}

func (s *Store) remove(project string) error {
	d, err := s.dir()
	if err != nil {
		return err
	}
	defer d.Close()
	c, err := canonical(project)
	if err != nil {
		return err
	}
	return unix.Unlinkat(int(d.Fd()), recordName(c), 0)
}

// Load returns the policy in force for project: its policy file when the
// user approved that exact content, else the embedded default, marked with
// the unapproved file (policy.Unapproved). A project without a policy file
// runs the default.
//
// The file and its record are read as one state: a reviewed write
// (Written) keeps the file approved at every instant, but a file read
// before such a write and a record read after it (or the reverse) would
// not match, and a running kernel would put the default in force for one
// look and audit a change nobody made. So the record is read before and
// after the file, and the reads are repeated until it did not change in
// between: the record then is the one in force when the file was read.
func Load(project string, s *Store) (*policy.Policy, error) {
	path := policy.ProjectPath(project)
	recPath := ""
	if s.home != "" {
		var err error
		if recPath, err = s.Path(project); err != nil {
			return nil, s.fail(err, "cannot name the policy approval record of "+project)
		}
	}
	readRec := func() ([]byte, error) {
		if recPath == "" {
			return nil, nil
		}
		return s.readRecord(recPath)
	}
	var data, raw []byte
	for attempt := 0; ; attempt++ {
		before, err := readRec()
		if err != nil {
			return nil, err
		}
		data, err = os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return policy.Default()
		}
		if err != nil {
			return nil, uerr.Wrap(err, policy.CodeRead, "cannot read "+path, err.Error(), "check its permissions")
		}
		if raw, err = readRec(); err != nil {
			return nil, err
		}
		if bytes.Equal(before, raw) && (before == nil) == (raw == nil) {
			break
		}
		if attempt == maxLoadAttempts {
			return nil, uerr.New(CodeStore, "the policy approval record "+recPath+" kept changing while "+path+" was read",
				"another process rewrote the approval on every look", "try again when `fluffy policy update` or `fluffy policy trust` has finished")
		}
		time.Sleep(time.Millisecond)
	}
	var rec *Record
	if raw != nil {
		var err error
		if rec, err = parseRecord(recPath, raw); err != nil {
			return nil, err
		}
	}
	h := Hash(data)
	if rec.Approves(h) {
		return policy.Load(path, data)
	}
	def, err := policy.Default()
	if err != nil {
		return nil, err
	}
	def.Unapproved = &policy.Unapproved{Path: path, Hash: h, Changed: rec != nil && len(rec.Approved) > 0}
	return def, nil
}

// Describe is one line naming the policy in force, for status output
// (p.Unapproved.Notice says why a project's file is not it).
func Describe(p *policy.Policy) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("%s (mode %s, sha256 %.12s)", p.File, p.Mode, p.Hash)
}
