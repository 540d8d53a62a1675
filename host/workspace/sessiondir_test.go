package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSessionDirIsPerProject: two projects on one home, each with a session
// of the same id (every project's first is "kernel"), get separate session
// directories; they used to share $FLUFFY_HOME/sessions/<id>, views and
// blobs included.
func TestSessionDirIsPerProject(t *testing.T) {
	home := t.TempDir()
	a, b := t.TempDir(), t.TempDir()
	link := filepath.Join(t.TempDir(), "a-link")
	must(t, os.Symlink(a, link))
	for _, tc := range []struct {
		name  string
		p, q  string
		equal bool
	}{
		{"two projects", a, b, false},
		{"one project by two paths", a, link, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SessionDir(home, tc.p, "kernel") == SessionDir(home, tc.q, "kernel"); got != tc.equal {
				t.Fatalf("SessionDir(%s) == SessionDir(%s): %v, want %v", tc.p, tc.q, got, tc.equal)
			}
		})
	}
	engine := defaultEngine(t)
	var dirs []string
	for _, p := range []string{a, b} {
		s, err := Open(context.Background(), "kernel", Options{Home: home, Project: p, Judge: engine, Reader: Identity{UID: os.Getuid(), GID: os.Getgid()}})
		must(t, err)
		dirs = append(dirs, s.Dir())
		must(t, s.Close())
	}
	if dirs[0] == dirs[1] {
		t.Fatalf("both projects' sessions in %s", dirs[0])
	}
}

// TestSavedChangeFoundInTheOldSessionDirectory: a change saved before
// session directories were keyed by project (its blob in
// $FLUFFY_HOME/sessions/<id>/blobs) is still there after an upgrade; a
// blob there with other content is not taken.
func TestSavedChangeFoundInTheOldSessionDirectory(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper bool
		want   int
	}{{"intact", false, 1}, {"other content", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newIngestFixture(t, Limits{})
			must(t, f.ingest(f.full(t, "src/a.go", "package a // changed\n")))
			must(t, f.s.Close())
			cur := filepath.Join(SessionDir(f.home, f.proj, "s1"), "blobs")
			old := filepath.Join(SessionsDir(f.home), "s1", "blobs")
			must(t, os.MkdirAll(filepath.Dir(old), 0o700))
			must(t, os.Rename(cur, old))
			if tc.tamper {
				ents, err := os.ReadDir(old)
				must(t, err)
				for _, e := range ents {
					p := filepath.Join(old, e.Name())
					must(t, os.Chmod(p, 0o644))
					must(t, os.WriteFile(p, []byte("package a // planted\n"), 0o644))
				}
			}
			s := f.open(t, Limits{})
			if got := len(s.Changes()); got != tc.want {
				t.Fatalf("%d changes after the move, want %d", got, tc.want)
			}
			if tc.want > 0 {
				b, err := os.ReadFile(s.Changes()[0].ContentPath)
				if err != nil || string(b) != "package a // changed\n" {
					t.Fatalf("content %q %v", b, err)
				}
			}
		})
	}
}
