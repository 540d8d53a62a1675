package pin

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

const observe = "mode: observe\ncapabilities:\n  - { name: everything, match: { syscall: \"*\" }, action: allow }\n"

func writePolicy(t *testing.T, project, content string) {
	t.Helper()
	path := policy.ProjectPath(project)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A cloned project's observe policy is not in force until approved;
// approving applies it; a hand edit un-approves it; a reviewed write
// (Written) keeps it approved; a project reached through a link is the
// same project.
func TestLoadAppliesOnlyApprovedContent(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	s := NewStore(home)
	def, err := policy.Default()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Load(project, s)
	if err != nil || p.Hash != def.Hash || p.Unapproved != nil {
		t.Fatalf("no file: the default, plainly: %v %+v", err, p)
	}
	writePolicy(t, project, observe)
	p, err = Load(project, s)
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode != policy.Enforce || p.Hash != def.Hash || p.Unapproved == nil || p.Unapproved.Changed || p.Unapproved.Hash != Hash([]byte(observe)) {
		t.Fatalf("an unapproved observe policy: %s %s %+v", p.File, p.Mode, p.Unapproved)
	}
	if err := s.Approve(project, []byte(observe), "test"); err != nil {
		t.Fatal(err)
	}
	if p, err = Load(project, s); err != nil || p.Mode != policy.Observe || p.Unapproved != nil {
		t.Fatalf("approved: %v %+v", err, p)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(project, link); err != nil {
		t.Fatal(err)
	}
	if p, err = Load(link, s); err != nil || p.Mode != policy.Observe {
		t.Fatalf("through a link: %v %+v", err, p)
	}
	writePolicy(t, project, observe+"# edited\n")
	if p, err = Load(project, s); err != nil || p.Hash != def.Hash || p.Unapproved == nil || !p.Unapproved.Changed {
		t.Fatalf("hand edit: %v %+v", err, p)
	}
	next := []byte("capabilities: []\n")
	if err := s.Written(project, next, "fluffy policy update", func() error {
		// Mid-write, both the old and the new content are approved.
		r, err := s.Lookup(project)
		if err != nil || !r.Approves(Hash(next)) {
			t.Errorf("new content not approved before the write: %v %+v", err, r)
		}
		return os.WriteFile(policy.ProjectPath(project), next, 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	r, err := s.Lookup(project)
	if err != nil || len(r.Approved) != 1 || !r.Approves(Hash(next)) || r.Content != string(next) {
		t.Fatalf("after the write: %v %+v", err, r)
	}
	if p, err = Load(project, s); err != nil || p.Hash != Hash(next) {
		t.Fatalf("reviewed write not in force: %v %+v", err, p)
	}
	path, _ := s.Path(project)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record: %v %v", fi, err)
	}
}

// A link planted where the store's directory goes is not followed.
func TestStoreDoesNotFollowLinks(t *testing.T) {
	home, elsewhere, project := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(home, "trust")); err != nil {
		t.Fatal(err)
	}
	err := NewStore(home).Approve(project, []byte(observe), "test")
	if uerr.From(err).Code != CodeStore {
		t.Fatalf("want %s, got %v", CodeStore, err)
	}
	if !containsCode(err, confine.CodeSymlink) {
		t.Fatalf("not refused as a link: %v", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Fatalf("written through the link: %v", ents)
	}
}

func containsCode(err error, code string) bool {
	for e := err; e != nil; {
		if ue, ok := e.(*uerr.Error); ok && ue.Code == code {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

// A kernel reloading while a reviewed write (Written) replaces the file
// never sees the file unapproved: Load reads the file and the record as
// one state, not the file before the write and the record after it (the
// cause of a reload audited twice in host/kernel).
func TestLoadDuringReviewedWritesNeverSeesTheFileUnapproved(t *testing.T) {
	home, project := t.TempDir(), t.TempDir()
	s := NewStore(home)
	path := policy.ProjectPath(project)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	a := []byte(observe)
	b := []byte(observe + "# edited\n")
	write := func(data []byte) error {
		return s.Written(project, data, "test", func() error { return policy.WriteAtomic(path, data) })
	}
	if err := write(a); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			data := a
			if i%2 == 0 {
				data = b
			}
			if err := write(data); err != nil {
				done <- err
				return
			}
		}
	}()
	var failure string
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; failure == "" && time.Now().Before(deadline); n++ {
		p, err := Load(project, s)
		switch {
		case err != nil:
			failure = fmt.Sprintf("load %d: %v", n, err)
		case p.Unapproved != nil:
			failure = fmt.Sprintf("load %d saw the file unapproved during a reviewed write: %+v", n, p.Unapproved)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if failure != "" {
		t.Fatal(failure)
	}
}
