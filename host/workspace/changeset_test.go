package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// sandboxed judges writes as tool-fs running in an L2 sandbox, the way the
// kernel identifies it.
func sandboxed(_ context.Context, plugin, _ string) (policy.Request, error) {
	return policy.Request{Caller: policy.Caller{Kind: "plugin", Plugin: plugin, PluginKind: "tool", Tags: []string{"core_plugin"}},
		Sandbox: "code-executor", SessionMode: "explore"}, nil
}

type ingestFixture struct {
	proj, home, out string
	db              *store.DB
	s               *Session
}

func newIngestFixture(t testing.TB, lim Limits) *ingestFixture {
	t.Helper()
	base := t.TempDir()
	f := &ingestFixture{proj: filepath.Join(base, "proj"), home: filepath.Join(base, "home"), out: filepath.Join(base, "out")}
	must(t, os.MkdirAll(f.out, 0o755))
	must(t, os.MkdirAll(f.home, 0o700))
	write(t, f.proj, "src/a.go", "package a\n\nfunc A() int { return 1 }\n", 0o644)
	write(t, f.proj, "src/run.sh", "#!/bin/sh\necho hi\n", 0o755)
	write(t, f.proj, "src/old.go", "package a // old\n", 0o644)
	write(t, f.proj, "README.md", "hello\n", 0o644)
	db, err := store.Open(context.Background(), store.Options{Dir: store.DefaultDir(f.proj)})
	must(t, err)
	t.Cleanup(func() { db.Close() })
	f.db = db
	f.s = f.open(t, lim)
	return f
}

func (f *ingestFixture) open(t testing.TB, lim Limits) *Session {
	t.Helper()
	s, err := Open(context.Background(), "s1", Options{Home: f.home, Project: f.proj, Judge: defaultEngine(t),
		Reader: Identity{UID: os.Getuid(), GID: os.Getgid()}, Now: later, DB: f.db, Identify: sandboxed, Limits: lim})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// artifact writes data into the output directory and returns its name.
func (f *ingestFixture) artifact(t *testing.T, name, data string) string {
	t.Helper()
	write(t, f.out, name, data, 0o644)
	return name
}

// full proposes content for rel, written against the file's current
// project content.
func (f *ingestFixture) full(t *testing.T, rel, content string) tool.FileChange {
	t.Helper()
	return tool.FileChange{Path: rel, Mode: tool.OutputFull, Artifact: f.artifact(t, "op/"+strings.ReplaceAll(rel, "/", "__")+".full", content),
		SHA256Before: f.projHash(t, rel), SHA256After: sum([]byte(content))}
}

func (f *ingestFixture) projHash(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.proj, rel))
	if os.IsNotExist(err) {
		return ""
	}
	must(t, err)
	return sum(b)
}

func (f *ingestFixture) ingest(changes ...tool.FileChange) error {
	return f.s.Ingest(context.Background(), router.Output{Plugin: "tool-fs", Tool: "fs.write", CallID: "c1", Dir: f.out, Changes: changes})
}

func codeOf(err error) string {
	if ue, ok := uerr.As(err); ok {
		return ue.Code
	}
	if err != nil {
		return "untyped: " + err.Error()
	}
	return ""
}

func (f *ingestFixture) viewFile(t *testing.T, rel string) (string, bool) {
	t.Helper()
	v, err := f.s.Prepare(context.Background(), toolFS())
	must(t, err)
	b, err := os.ReadFile(filepath.Join(v.Dir, rel))
	if os.IsNotExist(err) {
		return "", false
	}
	must(t, err)
	return string(b), true
}

// TestIngestShowsOwnWrites: a full file, a patch on top of it, a new file
// in new directories and a deletion reach the changeset and the next view,
// the project stays untouched, and the changeset survives a reopen.
func TestIngestShowsOwnWrites(t *testing.T) {
	f := newIngestFixture(t, Limits{})
	ctx := context.Background()
	if _, err := f.s.Prepare(ctx, toolFS()); err != nil {
		t.Fatal(err)
	}
	v1 := "package a\n\nfunc A() int { return 2 }\n"
	must(t, f.ingest(f.full(t, "src/a.go", v1), f.full(t, "src/new/deep/b.go", "package deep\n"),
		tool.FileChange{Path: "src/old.go", Delete: true, SHA256Before: f.projHash(t, "src/old.go")}))
	if got, _ := f.viewFile(t, "src/a.go"); got != v1 {
		t.Fatalf("view shows %q after the write", got)
	}
	if got, _ := f.viewFile(t, "src/new/deep/b.go"); got != "package deep\n" {
		t.Fatalf("new file in new directories: %q", got)
	}
	if _, ok := f.viewFile(t, "src/old.go"); ok {
		t.Fatal("deleted file still in the view")
	}
	if b, _ := os.ReadFile(filepath.Join(f.proj, "src/a.go")); string(b) == v1 {
		t.Fatal("ingest wrote the project")
	}
	if _, err := os.Stat(filepath.Join(f.proj, "src/old.go")); err != nil {
		t.Fatal("ingest deleted a project file")
	}

	// A patch written against the session's own write (what the AI read
	// back from its view).
	v2 := "package a\n\nfunc A() int { return 3 }\n"
	d, err := patch.Unified("src/a.go", []byte(v1), []byte(v2))
	must(t, err)
	must(t, f.ingest(tool.FileChange{Path: "src/a.go", Mode: tool.OutputPatch, Artifact: f.artifact(t, "op2/a.patch", d), SHA256Before: sum([]byte(v1)), SHA256After: sum([]byte(v2))}))
	if got, _ := f.viewFile(t, "src/a.go"); got != v2 {
		t.Fatalf("view after the patch: %q", got)
	}

	want := []string{"src/a.go", "src/new/deep/b.go", "src/old.go"}
	check := func(s *Session) {
		t.Helper()
		cs := s.Changes()
		var got []string
		for _, c := range cs {
			got = append(got, c.Path)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("changes %v, want %v", got, want)
		}
		a := cs[0]
		if a.Base != f.projHash(t, "src/a.go") || a.Hash != sum([]byte(v2)) || len(a.History) != 2 || a.Mode != 0o644 || a.Plugin != "tool-fs" || a.CallID != "c1" {
			t.Fatalf("src/a.go change: %+v", a)
		}
		if b, err := os.ReadFile(a.ContentPath); err != nil || string(b) != v2 {
			t.Fatalf("content path: %q %v", b, err)
		}
		if cs[1].Base != "" || cs[1].Delete {
			t.Fatalf("new file change: %+v", cs[1])
		}
		if len(cs) > 2 && (!cs[2].Delete || cs[2].ContentPath != "") {
			t.Fatalf("deletion: %+v", cs[2])
		}
	}
	check(f.s)
	// Persisted in the project database: a reopened session has it.
	f.s.Close()
	f.s = f.open(t, Limits{})
	check(f.s)
	if got, _ := f.viewFile(t, "src/a.go"); got != v2 {
		t.Fatalf("reopened view: %q", got)
	}

	// Discard one path: the view shows the project's file again.
	must(t, f.s.Discard("src/old.go"))
	if got, ok := f.viewFile(t, "src/old.go"); !ok || got != "package a // old\n" {
		t.Fatalf("discarded deletion: %q %v", got, ok)
	}
	want = want[:2]
	check(f.s)
	must(t, f.s.Discard())
	if len(f.s.Changes()) != 0 {
		t.Fatal("Discard() left changes")
	}
	if got, _ := f.viewFile(t, "src/a.go"); got != "package a\n\nfunc A() int { return 1 }\n" {
		t.Fatalf("view after discarding everything: %q", got)
	}
}

// TestIngestModeAndRevert: an executable keeps its mode in the changeset
// and the view; writing a file back to the project's content drops it
// from the changeset.
func TestIngestModeAndRevert(t *testing.T) {
	f := newIngestFixture(t, Limits{})
	orig := "#!/bin/sh\necho hi\n"
	must(t, f.ingest(f.full(t, "src/run.sh", "#!/bin/sh\necho bye\n")))
	cs := f.s.Changes()
	if len(cs) != 1 || cs[0].Mode != 0o755 {
		t.Fatalf("changes: %+v", cs)
	}
	v, err := f.s.Prepare(context.Background(), toolFS())
	must(t, err)
	fi, err := os.Stat(filepath.Join(v.Dir, "src/run.sh"))
	must(t, err)
	if fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("executable lost its mode in the view: %v", fi.Mode())
	}
	back := tool.FileChange{Path: "src/run.sh", Mode: tool.OutputFull, Artifact: f.artifact(t, "op/back.full", orig), SHA256Before: sum([]byte("#!/bin/sh\necho bye\n"))}
	must(t, f.ingest(back))
	if cs := f.s.Changes(); len(cs) != 0 {
		t.Fatalf("a file back at its project content is still a change: %+v", cs)
	}
}

// TestIngestRefuses: hostile and stale outputs are refused with a stable
// code, nothing of the call is taken (all or nothing), and the view is
// unchanged.
func TestIngestRefuses(t *testing.T) {
	cases := []struct {
		name  string
		lim   Limits
		setup func(t *testing.T, f *ingestFixture) []tool.FileChange
		code  string
	}{
		{"stale base", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			c := f.full(t, "src/a.go", "package a // mine\n")
			c.SHA256Before = sum([]byte("what the AI saw long ago\n"))
			return []tool.FileChange{c}
		}, CodeStale},
		{"user edited the file after the AI read it", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			c := f.full(t, "src/a.go", "package a // mine\n")
			write(t, f.proj, "src/a.go", "package a // the user's edit\n", 0o644)
			return []tool.FileChange{c}
		}, CodeStale},
		{"patch that no longer applies", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			old, _ := os.ReadFile(filepath.Join(f.proj, "src/a.go"))
			d, _ := patch.Unified("src/a.go", old, []byte("package a\n\nfunc A() int { return 9 }\n"))
			write(t, f.proj, "src/a.go", "package b\n\nfunc B() {}\n", 0o644)
			return []tool.FileChange{{Path: "src/a.go", Mode: tool.OutputPatch, Artifact: f.artifact(t, "p.patch", d), SHA256Before: f.projHash(t, "src/a.go")}}
		}, CodeStale},
		{"new file that exists meanwhile", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			c := f.full(t, "src/c.go", "package a\n")
			write(t, f.proj, "src/c.go", "package a // user\n", 0o644)
			return []tool.FileChange{c}
		}, CodeStale},
		{"dot-dot path", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{{Path: "../escape.go", Mode: tool.OutputFull, Artifact: f.artifact(t, "x", "x")}}
		}, "FS_PATH_ESCAPES"},
		{"absolute path", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{{Path: "/etc/passwd", Mode: tool.OutputFull, Artifact: f.artifact(t, "x", "x")}}
		}, "FS_PATH_ABSOLUTE"},
		{"NUL in path", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{{Path: "src/a\x00.go", Mode: tool.OutputFull, Artifact: f.artifact(t, "x", "x")}}
		}, CodeOutputInvalid},
		{"git hook", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{{Path: ".git/hooks/pre-commit", Mode: tool.OutputFull, Artifact: f.artifact(t, "x", "#!/bin/sh\n")}}
		}, "FS_PATH_RESERVED"},
		{"kernel database", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{{Path: ".fluffy/db/MANIFEST", Mode: tool.OutputFull, Artifact: f.artifact(t, "x", "x")}}
		}, "FS_PATH_RESERVED"},
		{"artifact is a symlink", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			must(t, os.Symlink(filepath.Join(f.proj, "README.md"), filepath.Join(f.out, "link.full")))
			return []tool.FileChange{{Path: "src/x.go", Mode: tool.OutputFull, Artifact: "link.full"}}
		}, CodeOutputInvalid},
		{"artifact directory is a symlink", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			must(t, os.Symlink(filepath.Join(f.proj, "src"), filepath.Join(f.out, "dir")))
			return []tool.FileChange{{Path: "src/x.go", Mode: tool.OutputFull, Artifact: "dir/a.go"}}
		}, CodeOutputInvalid},
		{"artifact is a hard link", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			secret := filepath.Join(filepath.Dir(f.out), "host-secret")
			must(t, os.WriteFile(secret, []byte("secret\n"), 0o600))
			must(t, os.Link(secret, filepath.Join(f.out, "hard.full")))
			return []tool.FileChange{{Path: "src/x.go", Mode: tool.OutputFull, Artifact: "hard.full"}}
		}, CodeOutputInvalid},
		{"artifact outside the output directory", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{{Path: "src/x.go", Mode: tool.OutputFull, Artifact: "../proj/README.md"}}
		}, CodeOutputInvalid},
		{"project path through a symlink", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			must(t, os.Symlink("src", filepath.Join(f.proj, "lnk")))
			return []tool.FileChange{{Path: "lnk/a.go", Mode: tool.OutputFull, Artifact: f.artifact(t, "x", "x"), SHA256Before: f.projHash(t, "src/a.go")}}
		}, "FS_PATH_SYMLINK"},
		{"write over a directory", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{{Path: "src", Mode: tool.OutputFull, Artifact: f.artifact(t, "x", "x")}}
		}, CodeWriteInvalid},
		{"file too large", Limits{MaxFileBytes: 1024}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{f.full(t, "src/big.go", strings.Repeat("x", 2048))}
		}, CodeOutputTooLarge},
		{"call too large", Limits{MaxCallBytes: 1500}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{f.full(t, "src/b1.go", strings.Repeat("x", 1000)), f.full(t, "src/b2.go", strings.Repeat("y", 1000))}
		}, CodeOutputTooLarge},
		{"too many files", Limits{MaxFiles: 1}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{f.full(t, "src/b1.go", "a"), f.full(t, "src/b2.go", "b")}
		}, CodeOutputTooLarge},
		{"declared hash is not the content's", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			c := f.full(t, "src/b.go", "package a\n")
			c.SHA256After = sum([]byte("something else"))
			return []tool.FileChange{c}
		}, CodeOutputInvalid},
		{"policy denies the path", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{f.full(t, ".env", "API_KEY=x\n")}
		}, CodeWriteDenied},
		{"unknown output mode", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			c := f.full(t, "src/b.go", "package a\n")
			c.Mode = "exec"
			return []tool.FileChange{c}
		}, CodeOutputInvalid},
		{"delete a file that is not there", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			return []tool.FileChange{{Path: "src/nothing.go", Delete: true}}
		}, CodeStale},
		{"one bad change refuses the whole call", Limits{}, func(t *testing.T, f *ingestFixture) []tool.FileChange {
			bad := f.full(t, "src/a.go", "package a // mine\n")
			bad.SHA256Before = ""
			return []tool.FileChange{f.full(t, "src/good.go", "package a\n"), bad}
		}, CodeStale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newIngestFixture(t, tc.lim)
			err := f.ingest(tc.setup(t, f)...)
			if got := codeOf(err); got != tc.code {
				t.Fatalf("code %q, want %q (%v)", got, tc.code, err)
			}
			if cs := f.s.Changes(); len(cs) != 0 {
				t.Fatalf("a refused call left changes: %+v", cs)
			}
			if _, ok := f.viewFile(t, "src/good.go"); ok {
				t.Fatal("a refused call reached the view")
			}
		})
	}
}

// TestIngestReviewedPathIsMarked: a path the policy sends to review is
// taken but carries the reasons (merge never auto-merges it).
func TestIngestReviewedPathIsMarked(t *testing.T) {
	f := newIngestFixture(t, Limits{})
	must(t, f.ingest(f.full(t, "README.md", "hello again\n")))
	cs := f.s.Changes()
	if len(cs) != 1 || len(cs[0].Review) == 0 {
		t.Fatalf("README.md change should carry review reasons: %+v", cs)
	}
}

// TestIngestLostBlobIsDropped: a change whose content a machine crash
// lost or tore (blobs are not fsynced) is dropped when the session is
// opened again, never shown with wrong content.
func TestIngestLostBlobIsDropped(t *testing.T) {
	f := newIngestFixture(t, Limits{})
	must(t, f.ingest(f.full(t, "src/a.go", "package a // one\n"), f.full(t, "src/b.go", "package a // two\n")))
	cs := f.s.Changes()
	must(t, os.Chmod(cs[0].ContentPath, 0o644))
	must(t, os.WriteFile(cs[0].ContentPath, []byte("package a // torn"), 0o644))
	f.s.Close()
	f.s = f.open(t, Limits{})
	cs = f.s.Changes()
	if len(cs) != 1 || cs[0].Path != "src/b.go" {
		t.Fatalf("changes after reopening: %+v", cs)
	}
	if got, _ := f.viewFile(t, "src/a.go"); got != "package a\n\nfunc A() int { return 1 }\n" {
		t.Fatalf("view shows %q for the dropped change", got)
	}
	// The drop is persisted too.
	f.s.Close()
	f.s = f.open(t, Limits{})
	if n := len(f.s.Changes()); n != 1 {
		t.Fatalf("%d changes after a second reopen", n)
	}
}

// TestSavedChangesCountAndDropWithoutOpening: a session's persisted
// changeset is counted and dropped (records and blobs) by id, without
// opening it, as `fluffy session list` / `archive --force` do for a session
// the kernel does not serve; reopening it then shows no change.
func TestSavedChangesCountAndDropWithoutOpening(t *testing.T) {
	f := newIngestFixture(t, Limits{})
	must(t, f.ingest(f.full(t, "src/a.go", "package a\n"), f.full(t, "src/new.go", "package a // new\n")))
	must(t, f.s.Close())
	for _, c := range []struct {
		id   string
		want int
	}{{"s1", 2}, {"other", 0}} {
		if n, err := SavedChanges(f.db, c.id); err != nil || n != c.want {
			t.Fatalf("SavedChanges(%s) = %d, %v; want %d", c.id, n, err, c.want)
		}
	}
	paths, err := DropSavedChanges(f.db, f.home, f.proj, "s1")
	if err != nil || strings.Join(paths, ",") != "src/a.go,src/new.go" {
		t.Fatalf("DropSavedChanges = %v, %v", paths, err)
	}
	if _, err := os.Stat(filepath.Join(SessionDir(f.home, f.proj, "s1"), "blobs")); !os.IsNotExist(err) {
		t.Fatalf("blobs left: %v", err)
	}
	if n, _ := SavedChanges(f.db, "s1"); n != 0 {
		t.Fatalf("%d changes left", n)
	}
	if s := f.open(t, Limits{}); len(s.Changes()) != 0 {
		t.Fatalf("reopened session has %v", s.Changes())
	}
}
