package fault

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/test/harness"
)

// bigFiles are test data enough that landing them (temp file, fsync,
// rename, directory fsync each) leaves a window to kill the kernel in.
func bigFiles(n int) map[string]string {
	line := strings.Repeat("x", 1<<10) + "\n"
	out := map[string]string{}
	for i := range n {
		out[fmt.Sprintf("testdata/big%d.txt", i)] = fmt.Sprintf("file %d\n", i) + strings.Repeat(line, 30)
	}
	return out
}

// killAtMerge runs the 14-file task and SIGKILLs the kernel once at(u)
// holds, then checks the recovery: every file is whole, the next kernel
// finishes the merge and its commit (one commit holding all 14 files,
// nothing left proposed, the workflow idle) and the rest of recovered.
func killAtMerge(t *testing.T, at func(u *user, tk *task) bool) {
	big := bigFiles(12)
	writes := []call{harness.Write("case_test.go", caseTest)}
	for p, c := range big {
		writes = append(writes, harness.Write(p, c))
	}
	u := newUser(t, harness.Turns([]call{harness.Plan()}, append(writes, harness.TestRun()), []call{harness.Write("wordfreq.go", wordfreqFixed), harness.TestRun()}))
	tk := u.start("make Count ignore case")
	deadline := time.Now().Add(3 * time.Minute)
	for !at(u, tk) {
		select {
		case <-tk.done:
			t.Fatalf("the task ended before the kill: exit %d\n%s\n%s", tk.code, harness.Tail(tk.stdout.String(), 3000), tk.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no merge within 3 minutes\n%s", harness.Tail(tk.stdout.String(), 3000))
		}
	}
	u.killKernel()
	var landed []string
	for p := range big {
		if _, err := os.Stat(filepath.Join(u.dir, p)); err == nil {
			landed = append(landed, p)
		}
	}
	t.Logf("%d of the 12 data files had landed at the kill", len(landed))
	tk.wait(t, time.Minute)
	_, _ = told(t, tk, "IPC_CLOSED")
	files := map[string][]string{"wordfreq.go": {wordfreq, wordfreqFixed}, "case_test.go": {"", caseTest}}
	for p, c := range big {
		files[p] = []string{"", c}
	}
	s := u.recovered(files)
	if s.Session.State != "idle" || s.Session.Pending != 0 {
		t.Fatalf("after the next kernel start the session is %+v, want idle with nothing proposed (the merge and its commit finished)", s)
	}
	if log := strings.Fields(u.git("log", "--format=%h")); len(log) != 2 {
		t.Fatalf("want exactly one commit on top of the first, git log: %v", log)
	}
	committed := strings.Fields(u.git("show", "--name-only", "--format=", "HEAD"))
	if len(committed) != 14 {
		t.Fatalf("the commit holds %d files, want the 14 merged ones: %v", len(committed), committed)
	}
	for p, c := range map[string]string{"wordfreq.go": wordfreqFixed, "case_test.go": caseTest, "testdata/big11.txt": big["testdata/big11.txt"]} {
		if got, _ := os.ReadFile(filepath.Join(u.dir, p)); string(got) != c {
			t.Fatalf("%s is not the merged content after the recovery", p)
		}
		if got := u.git("show", "HEAD:"+p); got != c {
			t.Fatalf("%s is not committed as merged", p)
		}
	}
	if st := u.git("status", "--porcelain", "--untracked-files=no"); st != "" {
		t.Fatalf("the merged files are not clean after the recovered commit:\n%s", st)
	}
}

// TestKernelKilledDuringMerge: SIGKILL at the merge's first temp file.
func TestKernelKilledDuringMerge(t *testing.T) {
	killAtMerge(t, func(u *user, _ *task) bool {
		for _, dir := range []string{u.dir, filepath.Join(u.dir, "testdata")} {
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".fluffy-merge-") || strings.HasPrefix(e.Name(), "big") {
					return true
				}
			}
		}
		return false
	})
}

// TestKernelKilledDuringCommit: SIGKILL once the task said it merged,
// while the VCS plugin builds the commit or the kernel applies it.
func TestKernelKilledDuringCommit(t *testing.T) {
	killAtMerge(t, func(_ *user, tk *task) bool {
		for _, ev := range tk.events(t) {
			if ev.Type == "notice" && strings.HasPrefix(ev.Text, "merged ") {
				return true
			}
		}
		time.Sleep(5 * time.Millisecond)
		return false
	})
}
