package merge

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, root, rel, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), mode))
	must(t, os.Chmod(p, mode))
}

func read(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if os.IsNotExist(err) {
		return "(absent)"
	}
	must(t, err)
	return string(b)
}

// fixture is a real project, its real database and audit log, and a real
// session whose changeset is filled through Ingest.
type fixture struct {
	proj, out string
	db        *store.DB
	log       *audit.Log
	s         *workspace.Session
	engine    *policy.Engine
	n         int
}

const (
	aGo    = "package a\n\nfunc A() int {\n\treturn 1\n}\n\nfunc B() int {\n\treturn 2\n}\n"
	script = "#!/bin/sh\necho hi\n"
)

func newFixture(t *testing.T) *fixture { return openFixture(t, t.TempDir(), true) }

// openFixture opens the fixture in base, creating the project when create.
func openFixture(t *testing.T, base string, create bool) *fixture {
	t.Helper()
	f := &fixture{proj: filepath.Join(base, "proj"), out: filepath.Join(base, "out")}
	home := filepath.Join(base, "home")
	if create {
		must(t, os.MkdirAll(home, 0o700))
		must(t, os.MkdirAll(f.out, 0o755))
		write(t, f.proj, "src/a.go", aGo, 0o644)
		write(t, f.proj, "src/run.sh", script, 0o755)
		write(t, f.proj, "src/old.go", "package a // old\n", 0o600)
		write(t, f.proj, "go.mod", "module x\n", 0o644)
	}
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{Dir: store.DefaultDir(f.proj)})
	must(t, err)
	f.db = db
	f.log, err = audit.Open(ctx, audit.Options{DB: db})
	must(t, err)
	t.Cleanup(func() { f.close() })
	p, err := policy.Default()
	must(t, err)
	f.engine = policy.NewEngine(p, policy.Options{})
	f.s, err = workspace.Open(ctx, "sess1", workspace.Options{Home: home, Project: f.proj, Judge: f.engine, DB: db,
		Reader: workspace.Identity{UID: os.Getuid(), GID: os.Getgid()},
		Identify: func(_ context.Context, plugin, _ string) (policy.Request, error) {
			return policy.Request{Caller: policy.Caller{Kind: "plugin", Plugin: plugin, PluginKind: "tool"}, Sandbox: "code-executor", SessionMode: "explore"}, nil
		}})
	must(t, err)
	return f
}

// close closes the session, the audit log and the database (once).
func (f *fixture) close() {
	if f.db == nil {
		return
	}
	f.s.Close()
	f.log.Close()
	f.db.Close()
	f.db = nil
}

func hashOf(b string) string { return hash([]byte(b)) }

// propose ingests full content for rel ("" content with del deletes it),
// written against what the session holds now.
func (f *fixture) propose(t *testing.T, rel, content string, del bool) {
	t.Helper()
	before := ""
	for _, c := range f.s.Changes() {
		if c.Path == rel {
			before = c.Hash
		}
	}
	if before == "" {
		if b, err := os.ReadFile(filepath.Join(f.proj, rel)); err == nil {
			before = hashOf(string(b))
		}
	}
	f.n++
	fc := tool.FileChange{Path: rel, SHA256Before: before, Delete: del}
	if !del {
		name := filepath.Join("op", strings.ReplaceAll(rel, "/", "_")+string(rune('a'+f.n)))
		write(t, f.out, name, content, 0o644)
		fc.Mode, fc.Artifact = tool.OutputFull, name
	}
	must(t, f.s.Ingest(context.Background(), router.Output{Plugin: "tool-fs", Tool: "fs.write", CallID: "call-" + rel, Dir: f.out, Changes: []tool.FileChange{fc}}))
}

func (f *fixture) merger(t *testing.T, o Options) *Merger {
	t.Helper()
	o.DB, o.Audit = f.db, f.log
	m, err := New(o)
	must(t, err)
	return m
}

func (f *fixture) plan(t *testing.T, m *Merger) *Review {
	t.Helper()
	r, err := m.Plan(context.Background(), f.proj, f.s.Changes())
	must(t, err)
	r.Model = "test-model"
	return r
}

func (f *fixture) events(t *testing.T, typ audit.EventType) []audit.Record {
	t.Helper()
	recs, err := f.log.Query(context.Background(), audit.Filter{Types: []audit.EventType{typ}})
	must(t, err)
	return recs
}

const aGo2 = "package a\n\nfunc A() int {\n\treturn 10\n}\n\nfunc B() int {\n\treturn 2\n}\n\nfunc C() int { return 3 }\n"

// TestPlan: per file unified diff, line counts, ranges with the hash of
// the new lines, create/delete flags, mode.
func TestPlan(t *testing.T) {
	f := newFixture(t)
	f.propose(t, "src/a.go", aGo2, false)
	f.propose(t, "src/new/dir/n.go", "package dir\n\nvar X = 1\n", false)
	f.propose(t, "src/old.go", "", true)
	m := f.merger(t, Options{})
	r := f.plan(t, m)
	if len(r.Files) != 3 || r.Session != "sess1" || r.Conflicts != 0 {
		t.Fatalf("review: %+v", r)
	}
	a, n, old := r.Files[0], r.Files[1], r.Files[2]
	if a.Path != "src/a.go" || a.Added != 3 || a.Removed != 1 || a.Create || a.Delete || a.Mode != 0o644 {
		t.Fatalf("src/a.go: %+v", a)
	}
	for _, want := range []string{"--- a/src/a.go", "+++ b/src/a.go", "-\treturn 1\n", "+\treturn 10\n", "+func C() int { return 3 }\n"} {
		if !strings.Contains(a.Diff, want) {
			t.Fatalf("diff lacks %q:\n%s", want, a.Diff)
		}
	}
	wantRanges := []Range{
		{Path: "src/a.go", Start: 4, Lines: 1, Removed: 1, SHA256: hashOf("\treturn 10\n")},
		{Path: "src/a.go", Start: 10, Lines: 2, Removed: 0, SHA256: hashOf("\nfunc C() int { return 3 }\n")},
	}
	if len(a.Ranges) != len(wantRanges) {
		t.Fatalf("ranges %+v, want %+v", a.Ranges, wantRanges)
	}
	for i := range wantRanges {
		if a.Ranges[i] != wantRanges[i] {
			t.Fatalf("range %d: %+v, want %+v", i, a.Ranges[i], wantRanges[i])
		}
	}
	if !n.Create || n.Added != 3 || n.Removed != 0 || n.Mode != 0o644 || len(n.Ranges) != 1 || n.Ranges[0].Start != 1 || n.Ranges[0].SHA256 != hashOf("package dir\n\nvar X = 1\n") {
		t.Fatalf("new file: %+v", n)
	}
	if !old.Delete || old.Removed != 1 || old.Added != 0 || old.Mode != 0o600 {
		t.Fatalf("deletion: %+v", old)
	}
	if r.Added != 6 || r.Removed != 2 || r.Lines != 8 {
		t.Fatalf("totals: +%d -%d = %d", r.Added, r.Removed, r.Lines)
	}
	if txt := r.Text(); !strings.Contains(txt, "# delete src/old.go") || !strings.Contains(txt, "# new file src/new/dir/n.go") {
		t.Fatalf("text:\n%s", txt)
	}
}

// TestAuto is the auto-merge criteria.
func TestAuto(t *testing.T) {
	cases := []struct {
		name      string
		o         Options
		green     bool
		edit      func(t *testing.T, f *fixture)
		propose   func(t *testing.T, f *fixture)
		auto      bool
		reasonHas string
	}{
		{"green, small, plain", Options{}, true, nil, nil, true, ""},
		{"tests not green", Options{}, false, nil, nil, false, "tests are not all passing"},
		{"over the line threshold", Options{AutoMaxLines: 3}, true, nil, nil, false, "more than merge.auto_max_lines (3)"},
		{"sensitive by the policy at ingest", Options{}, true, nil, func(t *testing.T, f *fixture) { f.propose(t, "go.mod", "module y\n", false) }, false, "go.mod is sensitive"},
		{"sensitive by the merge's judge", Options{Sensitive: func(_ context.Context, p string) []string {
			if p == "src/a.go" {
				return []string{"owned by the security team"}
			}
			return nil
		}}, true, nil, nil, false, "owned by the security team"},
		{"conflict", Options{}, true, func(t *testing.T, f *fixture) { write(t, f.proj, "src/a.go", "package a // user\n", 0o644) }, nil, false, "changed in the project"},
		{"binary", Options{}, true, nil, func(t *testing.T, f *fixture) { f.propose(t, "src/blob.bin", "\x00\x01\x02", false) }, false, "binary"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.propose(t, "src/a.go", aGo2, false)
			if tc.propose != nil {
				tc.propose(t, f)
			}
			if tc.edit != nil {
				tc.edit(t, f)
			}
			m := f.merger(t, tc.o)
			d := m.Auto(f.plan(t, m), tc.green)
			if d.Auto != tc.auto || !strings.Contains(strings.Join(d.Reasons, "\n"), tc.reasonHas) {
				t.Fatalf("decision %+v, want auto=%v with %q", d, tc.auto, tc.reasonHas)
			}
		})
	}
}

// TestApply: approved files land atomically with their mode, new
// directories are created, deletions happen, unapproved files stay, and
// merge_approved carries every changed range.
func TestApply(t *testing.T) {
	f := newFixture(t)
	f.propose(t, "src/a.go", aGo2, false)
	f.propose(t, "src/run.sh", "#!/bin/sh\necho bye\n", false)
	f.propose(t, "src/new/dir/n.go", "package dir\n", false)
	f.propose(t, "src/old.go", "", true)
	f.propose(t, "src/later.go", "package a // not approved\n", false)
	m := f.merger(t, Options{})
	r := f.plan(t, m)
	op, err := m.Apply(context.Background(), r, []string{"src/a.go", "src/run.sh", "src/new/dir/n.go", "src/old.go"})
	must(t, err)
	if got := strings.Join(op.Landed(), ","); got != "src/a.go,src/new/dir/n.go,src/old.go,src/run.sh" {
		t.Fatalf("landed %s", got)
	}
	for rel, want := range map[string]string{"src/a.go": aGo2, "src/run.sh": "#!/bin/sh\necho bye\n", "src/new/dir/n.go": "package dir\n", "src/old.go": "(absent)", "src/later.go": "(absent)"} {
		if got := read(t, f.proj, rel); got != want {
			t.Errorf("%s: %q, want %q", rel, got, want)
		}
	}
	fi, err := os.Stat(filepath.Join(f.proj, "src/run.sh"))
	must(t, err)
	if fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode not preserved: %v", fi.Mode())
	}
	ents, err := os.ReadDir(filepath.Join(f.proj, "src"))
	must(t, err)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".fluffy-merge-") {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}
	evs := f.events(t, audit.EventMergeApproved)
	if len(evs) != 4 {
		t.Fatalf("%d merge_approved records, want 4", len(evs))
	}
	var rs []Range
	for _, e := range evs {
		if e.Metadata[audit.MetaPath] == "src/a.go" {
			must(t, json.Unmarshal([]byte(e.Metadata["ranges"]), &rs))
			if e.SessionID != "sess1" || e.Metadata["model"] != "test-model" || e.Caller != "user" {
				t.Fatalf("record: %+v", e)
			}
		}
	}
	if len(rs) != 2 || rs[0].SHA256 != hashOf("\treturn 10\n") || rs[0].Start != 4 {
		t.Fatalf("ranges in the audit record: %+v", rs)
	}
	ops, err := m.Operations(true)
	must(t, err)
	if len(ops) != 0 {
		t.Fatalf("finished merge still unfinished in the log: %+v", ops[0])
	}
}

// TestConflictKept: a file the user changed after the session read it is
// a conflict at plan time, and one changed between plan and apply is
// caught at apply time; neither is overwritten.
func TestConflictKept(t *testing.T) {
	f := newFixture(t)
	f.propose(t, "src/a.go", aGo2, false)
	f.propose(t, "src/run.sh", "#!/bin/sh\necho bye\n", false)
	f.propose(t, "src/b.go", "package a // session\n", false)
	write(t, f.proj, "src/a.go", "package a // the user's\n", 0o644)
	m := f.merger(t, Options{})
	r := f.plan(t, m)
	if !r.Files[0].Conflict || r.Conflicts != 1 {
		t.Fatalf("plan missed the conflict: %+v", r.Files[0])
	}
	write(t, f.proj, "src/run.sh", "#!/bin/sh\necho user\n", 0o755)       // after the plan
	write(t, f.proj, "src/b.go", "package a // user created it\n", 0o644) // a new file the user made meanwhile
	op, err := m.Apply(context.Background(), r, r.Paths())
	must(t, err)
	if got := strings.Join(op.Conflicts(), ","); got != "src/a.go,src/b.go,src/run.sh" {
		t.Fatalf("conflicts %s (landed %v)", got, op.Landed())
	}
	for rel, want := range map[string]string{"src/a.go": "package a // the user's\n", "src/run.sh": "#!/bin/sh\necho user\n", "src/b.go": "package a // user created it\n"} {
		if got := read(t, f.proj, rel); got != want {
			t.Errorf("%s overwritten: %q", rel, got)
		}
	}
	if n := len(f.events(t, audit.EventMergeApproved)); n != 0 {
		t.Fatalf("%d merge_approved for conflicts", n)
	}
}

// TestCrashResume: a kernel killed after the first file of a merge (the
// afterFile hook stops the apply there, leaving a temp file as a kill in
// the middle of the next file would) leaves the log unfinished; Resume
// finishes it, removes the temp file, and audits each file once.
func TestCrashResume(t *testing.T) {
	f := newFixture(t)
	f.propose(t, "src/a.go", aGo2, false)
	f.propose(t, "src/b.go", "package a\n\nvar B = 2\n", false)
	f.propose(t, "src/run.sh", "#!/bin/sh\necho bye\n", false)
	killed := errors.New("killed")
	var tmpLeft string
	m := f.merger(t, Options{afterFile: func(op, p string) error {
		// Half-written next file, as a kill during its write leaves it.
		tmpLeft = filepath.Join(f.proj, "src", tempName(op, 1))
		must(t, os.WriteFile(tmpLeft, []byte("package a\n\nvar"), 0o644))
		return killed
	}})
	r := f.plan(t, m)
	op, err := m.Apply(context.Background(), r, r.Paths())
	if !errors.Is(err, killed) {
		t.Fatalf("apply: %v", err)
	}
	if got := strings.Join(op.Landed(), ","); got != "src/a.go" {
		t.Fatalf("landed before the kill: %s", got)
	}
	if read(t, f.proj, "src/a.go") != aGo2 || read(t, f.proj, "src/b.go") != "(absent)" || read(t, f.proj, "src/run.sh") != script {
		t.Fatal("project is not what a kill after the first file leaves")
	}

	// The restarted kernel: a new Merger over the same database reports
	// exactly which files landed, then finishes.
	m2 := f.merger(t, Options{})
	ops, err := m2.Operations(true)
	must(t, err)
	if len(ops) != 1 || ops[0].State != OpApplying || strings.Join(ops[0].Landed(), ",") != "src/a.go" || len(ops[0].with(FilePending)) != 2 {
		t.Fatalf("merge log after the kill: %+v", ops)
	}
	done, err := m2.Resume(context.Background())
	must(t, err)
	if len(done) != 1 || done[0].State != OpDone || strings.Join(done[0].Landed(), ",") != "src/a.go,src/b.go,src/run.sh" {
		t.Fatalf("resumed: %+v", done)
	}
	if read(t, f.proj, "src/b.go") != "package a\n\nvar B = 2\n" || read(t, f.proj, "src/run.sh") != "#!/bin/sh\necho bye\n" {
		t.Fatal("resume did not finish the merge")
	}
	if fi, err := os.Stat(filepath.Join(f.proj, "src/run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode after resume: %v %v", fi.Mode(), err)
	}
	if _, err := os.Lstat(tmpLeft); !os.IsNotExist(err) {
		t.Fatalf("temp file of the killed merge left: %v", err)
	}
	if n := len(f.events(t, audit.EventMergeApproved)); n != 3 {
		t.Fatalf("%d merge_approved records, want 3", n)
	}
	// The session still lists the merged changes until the caller
	// discards them: a new plan shows them as already in the project, not
	// as conflicts, and they do not block an auto-merge.
	r2, err := m2.Plan(context.Background(), f.proj, f.s.Changes())
	must(t, err)
	for _, fd := range r2.Files {
		if !fd.InProject || fd.Conflict || fd.Added+fd.Removed != 0 {
			t.Fatalf("already merged file in a new plan: %+v", fd)
		}
	}
	if d := m2.Auto(r2, true); !d.Auto {
		t.Fatalf("already merged files block: %+v", d)
	}
	op2, err := m2.Apply(context.Background(), r2, r2.Paths())
	must(t, err)
	if len(op2.Landed()) != 3 || len(f.events(t, audit.EventMergeApproved)) != 3 {
		t.Fatalf("re-applying merged files: %+v", op2)
	}
	// Nothing left to resume.
	again, err := m2.Resume(context.Background())
	must(t, err)
	if len(again) != 0 {
		t.Fatalf("resume again: %+v", again)
	}
}

// TestReject records merge_rejected with the reason and the ranges, and
// writes nothing.
func TestReject(t *testing.T) {
	f := newFixture(t)
	f.propose(t, "src/a.go", aGo2, false)
	f.propose(t, "src/b.go", "package a\n", false)
	m := f.merger(t, Options{})
	r := f.plan(t, m)
	must(t, m.Reject(context.Background(), r, "C is not wanted", "src/a.go"))
	if err := m.Reject(context.Background(), r, "x", "src/nope.go"); err == nil {
		t.Fatal("rejecting a path not in the review must fail")
	}
	evs := f.events(t, audit.EventMergeRejected)
	if len(evs) != 1 || evs[0].Metadata[audit.MetaPath] != "src/a.go" || !strings.Contains(evs[0].DenyReason, "C is not wanted") || !strings.Contains(evs[0].Metadata["ranges"], hashOf("\treturn 10\n")) {
		t.Fatalf("merge_rejected: %+v", evs)
	}
	if read(t, f.proj, "src/a.go") != aGo {
		t.Fatal("reject wrote the project")
	}
}

// TestKilledMidMerge kills a real process (SIGKILL, no cleanup, no
// database close) right after the first file of a merge landed; a new
// process reads the merge log, reports exactly which file landed, and
// resumes.
func TestKilledMidMerge(t *testing.T) {
	if base := os.Getenv("FLUFFY_MERGE_KILL_CHILD"); base != "" {
		f := openFixture(t, base, false)
		m := f.merger(t, Options{afterFile: func(op, p string) error {
			return syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}})
		r := f.plan(t, m)
		_, err := m.Apply(context.Background(), r, r.Paths())
		t.Fatalf("the child survived its kill: %v", err)
	}
	base := t.TempDir()
	f := openFixture(t, base, true)
	f.propose(t, "src/a.go", aGo2, false)
	f.propose(t, "src/b.go", "package a\n\nvar B = 2\n", false)
	f.propose(t, "src/old.go", "", true)
	f.close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledMidMerge$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FLUFFY_MERGE_KILL_CHILD="+base)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed: %v\n%s", err, out)
	}
	if read(t, f.proj, "src/a.go") != aGo2 || read(t, f.proj, "src/b.go") != "(absent)" || read(t, f.proj, "src/old.go") != "package a // old\n" {
		t.Fatal("the project is not what a kill after the first file leaves")
	}

	f = openFixture(t, base, false)
	m := f.merger(t, Options{})
	ops, err := m.Operations(true)
	must(t, err)
	if len(ops) != 1 || ops[0].State != OpApplying || strings.Join(ops[0].Landed(), ",") != "src/a.go" || len(ops[0].with(FilePending)) != 2 {
		t.Fatalf("merge log after the kill: %+v", ops)
	}
	done, err := m.Resume(context.Background())
	must(t, err)
	if len(done) != 1 || strings.Join(done[0].Landed(), ",") != "src/a.go,src/b.go,src/old.go" {
		t.Fatalf("resumed: %+v", done)
	}
	if read(t, f.proj, "src/b.go") != "package a\n\nvar B = 2\n" || read(t, f.proj, "src/old.go") != "(absent)" {
		t.Fatal("resume did not finish the merge")
	}
	if n := len(f.events(t, audit.EventMergeApproved)); n != 3 {
		t.Fatalf("%d merge_approved records, want 3", n)
	}
}

// TestSensitiveByPolicy: the default policy's review rules make a path
// sensitive; a plain source path is not.
func TestSensitiveByPolicy(t *testing.T) {
	p, err := policy.Default()
	must(t, err)
	sens := SensitiveByPolicy(policy.NewEngine(p, policy.Options{}), policy.Request{Caller: policy.Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool"}, Sandbox: "code-executor", SessionMode: "explore"})
	for path, want := range map[string]string{
		"src/a.go":                 "",
		".github/workflows/ci.yml": "a human reviews them",
		"go.mod":                   "a human reviews them",
		".env":                     "never readable or writable",
	} {
		got := strings.Join(sens(context.Background(), path), "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

// TestFileBecomesDirectory: the changeset deletes the project file "src/old.go"
// and creates "src/old.go/x.go" under the same name; the plan shows no conflict
// and apply deletes the file before creating the directory.
func TestFileBecomesDirectory(t *testing.T) {
	f := newFixture(t)
	f.propose(t, "src/old.go", "", true)
	f.propose(t, "src/old.go/x.go", "package x\n", false)
	m := f.merger(t, Options{})
	r := f.plan(t, m)
	if r.Conflicts != 0 || len(r.Files) != 2 || !r.Files[1].Create {
		t.Fatalf("plan: %+v", r.Files)
	}
	op, err := m.Apply(context.Background(), r, r.Paths())
	must(t, err)
	if strings.Join(op.Landed(), ",") != "src/old.go,src/old.go/x.go" || read(t, f.proj, "src/old.go/x.go") != "package x\n" {
		t.Fatalf("apply: %+v", op.Files)
	}
}
