package fault

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/test/harness"
)

// told asserts the task ended with a structured error of one of codes
// (what happened, why, what to do), on stderr or as the --json error
// event before its done event, and returns the code and the done event's
// reason.
func told(t *testing.T, tk *task, codes ...string) (code, reason string) {
	t.Helper()
	se := tk.stderr.String()
	if tk.code == 0 {
		t.Fatalf("the task exited 0 after the fault\nstderr:\n%s", se)
	}
	if d := tk.finished(t); d != nil {
		reason = d.Done.Reason
	}
	for _, c := range codes {
		if strings.Contains(se, "Code: "+c) {
			if !strings.Contains(se, "ERROR: ") || !strings.Contains(se, "Fix: ") {
				t.Fatalf("the %s error does not say what happened and what to do:\n%s", c, se)
			}
			return c, reason
		}
		for _, ev := range tk.events(t) {
			if ev.Type == "error" && ev.Error != nil && ev.Error.Code == c {
				if ev.Error.What == "" || ev.Error.Fix == "" || reason == "" {
					t.Fatalf("the %s error does not say what happened and what to do: %+v, reason %q", c, ev.Error, reason)
				}
				return c, reason
			}
		}
	}
	t.Fatalf("the task's error is none of %v\nstderr:\n%s\nstdout tail:\n%s", codes, se, harness.Tail(tk.stdout.String(), 2000))
	return "", ""
}

// session is the part of `fluffy session show` the suite checks.
type session struct {
	Session struct {
		ID      string `json:"id"`
		State   string `json:"state"`
		Mode    string `json:"mode"`
		Pending int    `json:"pending_changes"`
	} `json:"session"`
	Status struct {
		State   string `json:"state"`
		Pending int    `json:"pending_changes"`
		Running bool   `json:"running"`
	} `json:"status"`
	Workflow struct {
		State string `json:"state"`
		Mode  string `json:"mode"`
		Ref   string `json:"changeset_ref"`
	} `json:"workflow"`
}

// recovered checks what a fault left, through the commands a user has:
// every listed file is whole (one of its allowed contents, "" for absent)
// and no merge temp file is left; the repository is sound; the session
// resumes with its workflow state and changeset agreeing; once the kernel
// stops no container of the home is left; the audit chain verifies.
func (u *user) recovered(files map[string][]string) session {
	t := u.t
	t.Helper()
	for path, allowed := range files {
		got, err := os.ReadFile(filepath.Join(u.dir, path))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		ok := false
		for _, a := range allowed {
			ok = ok || string(got) == a
		}
		if !ok {
			t.Fatalf("%s holds neither its old nor its new content (%d bytes):\n%.400s", path, len(got), got)
		}
	}
	// The next kernel start finishes an interrupted merge and removes its
	// temp files; session list starts one.
	so, se, code := u.run("session", "list")
	if code != 0 {
		t.Fatalf("session list after the fault: exit %d\n%s%s", code, so, se)
	}
	_ = filepath.WalkDir(u.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".fluffy") {
			return filepath.SkipDir
		}
		if strings.HasPrefix(d.Name(), ".fluffy-merge-") {
			t.Fatalf("a merge temp file is left in the project: %s", p)
		}
		return nil
	})
	u.git("fsck", "--no-dangling")
	u.git("status", "--porcelain")
	id := ""
	for _, l := range strings.Split(so, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "*" {
			id = f[1]
		}
	}
	if id == "" {
		t.Fatalf("no current session in:\n%s", so)
	}
	if so, se, code := u.run("session", "resume", id); code != 0 || !strings.Contains(so, "resumed") {
		t.Fatalf("session resume %s: exit %d\n%s%s", id, code, so, se)
	}
	so, se, code = u.run("session", "show")
	if code != 0 {
		t.Fatalf("session show: exit %d\n%s", code, se)
	}
	var s session
	if err := json.Unmarshal([]byte(so), &s); err != nil {
		t.Fatalf("session show: %v\n%s", err, so)
	}
	if s.Session.State != s.Workflow.State || s.Status.State != s.Workflow.State || s.Session.Pending != s.Status.Pending ||
		s.Session.Mode != s.Workflow.Mode || s.Workflow.Ref != s.Session.ID || s.Status.Running {
		t.Fatalf("the session disagrees with itself after the fault: %+v", s)
	}
	if _, se, code := u.run("kernel", "stop"); code != 0 {
		t.Fatalf("kernel stop: exit %d\n%s", code, se)
	}
	u.noContainers()
	if so, se, code := u.run("audit", "verify"); code != 0 {
		t.Fatalf("audit verify after the fault: exit %d\n%s%s", code, so, se)
	}
	return s
}

// noContainers waits until no container of the home is listed (the
// engine lists a container whose removal is under way for a moment). A
// kernel that exits leaves none of its own; what a killed kernel (or one
// cut off from the engine) could not remove waits for the next kernel
// that prepares its sandbox, or for the documented `fluffy sandbox gc`,
// which runs here once only such containers are left.
func (u *user) noContainers() {
	u.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	gc := false
	for {
		left := u.containers()
		if len(left) == 0 {
			return
		}
		own := false
		for _, c := range left {
			f := strings.Split(c, "=")
			own = own || !u.dead[f[len(f)-1]]
		}
		if !own && !gc {
			if so, se, code := u.run("sandbox", "gc"); code != 0 || !strings.HasPrefix(so, "removed ") {
				u.t.Fatalf("sandbox gc: exit %d\n%s%s", code, so, se)
			}
			gc = true
			continue
		}
		if time.Now().After(deadline) {
			u.t.Fatalf("containers of the test's home are left behind (id=plugin=kernel; killed kernels %v): %v\nkernel log:\n%s", u.dead, left, u.kernelLog())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kernelLog is the end of the project's kernel log.
func (u *user) kernelLog() string {
	b, _ := os.ReadFile(filepath.Join(u.home, "k", sha256Hex(filepath.Clean(u.dir))[:16]+".log"))
	return harness.Tail(string(b), 4000)
}

// finishes plays a model that completes the change from whatever state
// the fault left (a refused plan.complete is just an error it reads) and
// asserts the task ends merged and committed with both files.
func (u *user) finishes() {
	t := u.t
	t.Helper()
	u.srv.Play(providertestTurns(harness.Turns([]call{harness.Plan()},
		[]call{harness.Write("slow_test.go", "package wordfreq\n"), harness.Write("case_test.go", caseTest), harness.TestRun()},
		[]call{harness.Write("wordfreq.go", wordfreqFixed), harness.TestRun()}))...)
	tk := u.start("make Count ignore case")
	tk.wait(t, 3*time.Minute)
	done := tk.finished(t)
	if tk.code != 0 || done == nil || done.Done.Status != "done" || done.Done.Commit == "" {
		t.Fatalf("the task after the fault did not end committed: exit %d, done %+v\nstdout:\n%s\nstderr:\n%s", tk.code, done, harness.Tail(tk.stdout.String(), 3000), tk.stderr.String())
	}
	for path, want := range map[string]string{"wordfreq.go": wordfreqFixed, "case_test.go": caseTest} {
		if got, _ := os.ReadFile(filepath.Join(u.dir, path)); string(got) != want {
			t.Fatalf("%s after the follow-up task:\n%s", path, got)
		}
	}
	if head := strings.TrimSpace(u.git("rev-parse", "HEAD")); head != done.Done.Commit {
		t.Fatalf("HEAD %s, the task committed %s", head, done.Done.Commit)
	}
	_, _, _ = u.run("kernel", "stop")
	u.noContainers()
	if so, se, code := u.run("audit", "verify"); code != 0 {
		t.Fatalf("audit verify: exit %d\n%s%s", code, so, se)
	}
}

var _ = provider.Event{}
