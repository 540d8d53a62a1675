package state

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/host/audit"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/policy"
)

// envKernelChild makes the test binary act as a kernel process that
// drives a session to code_writing and then waits to be killed.
const envKernelChild = "FLUFFY_STATE_TEST_KERNEL"

func TestMain(m *testing.M) {
	if spec := os.Getenv(envKernelChild); spec != "" {
		if err := kernelChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "kernel child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// kernelChild opens the project like a kernel (store, audit, policy,
// state manager), drives session "sess-1" to code_writing on a real red
// run, writes source, reports READY and blocks.
func kernelChild(spec string) error {
	project, viewDir, ok := strings.Cut(spec, "|")
	if !ok {
		return errors.New("bad spec")
	}
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{Dir: store.DefaultDir(project)})
	if err != nil {
		return err
	}
	l, err := audit.Open(ctx, audit.Options{DB: db})
	if err != nil {
		return err
	}
	p, err := policy.Default()
	if err != nil {
		return err
	}
	mg, err := NewManager(Options{DB: db, Audit: l, Policy: policy.NewEngine(p, policy.Options{}), Project: project})
	if err != nil {
		return err
	}
	v := &dirView{dir: viewDir}
	m, err := mg.Open(ctx, SessionConfig{ID: "sess-1", ChangesetRef: "cs-1", View: v})
	if err != nil {
		return err
	}
	if _, err := m.Start(ctx, "add Mul"); err != nil {
		return err
	}
	if _, err := m.PlanComplete(ctx, "TestMul first", "ai"); err != nil {
		return err
	}
	if err := m.Allowed("fs.write", "calc_test.go", true); err != nil {
		return err
	}
	if err := v.writeFile("calc_test.go", mulTest); err != nil {
		return err
	}
	run, err := goTestRun(v)
	if err != nil {
		return err
	}
	if _, err := m.RecordTestRun(ctx, run); err != nil {
		return err
	}
	if err := m.Allowed("fs.write", "mul.go", true); err != nil {
		return err
	}
	if err := v.writeFile("mul.go", mulCode); err != nil {
		return err
	}
	st := m.Status()
	fmt.Printf("READY %s %s %s\n", st.State, st.Mode, st.ChangesetRef)
	select {} // wait for SIGKILL
}

const mulTest = "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif got := Mul(2, 3); got != 6 {\n\t\tt.Fatalf(\"Mul(2, 3) = %d\", got)\n\t}\n}\n"
const mulCode = "package calc\n\n// Mul multiplies.\nfunc Mul(a, b int) int { return a * b }\n"

// TestResumeAfterSIGKILL kills a real kernel process in code_writing; a new
// one resumes in code_writing with the same mode, changeset reference and
// budget, and carries on.
func TestResumeAfterSIGKILL(t *testing.T) {
	project, viewDir := t.TempDir(), t.TempDir()
	copyDir(t, "testdata/fixtures/undefined", viewDir)
	_ = os.Remove(filepath.Join(viewDir, "calc_test.go"))
	// The project's budget: a baseline and an explore lock.
	budget := NewBudget(project, DefaultDebt(), nil)
	want := Baseline{Percent: 80, UpdatedAt: time.Now().UTC().Truncate(time.Second), Lock: &Lock{At: time.Now().UTC().Truncate(time.Second), Baseline: 80, Coverage: 71, Session: "earlier"}}
	if err := budget.save(want); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envKernelChild+"="+project+"|"+viewDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY") {
				ready <- sc.Text()
				return
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if !ok || line != "READY code_writing strict cs-1" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child said %q", line)
		}
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("child never reached code_writing")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", werr)
	}

	// A new kernel.
	e := newEnvIn(t, project, nil)
	ctx := context.Background()
	snap, ok, err := e.mg.Latest()
	if err != nil || !ok {
		t.Fatalf("Latest: %v %v", ok, err)
	}
	if snap.Session != "sess-1" || snap.State != CodeWriting || snap.Mode != Strict || snap.ChangesetRef != "cs-1" || snap.RedRun == nil || snap.WriteBase == "" {
		t.Fatalf("persisted snapshot %+v", snap)
	}
	// The workspace restores its changeset; the machine resumes over it.
	v := &dirView{dir: viewDir}
	v.setChanged("calc_test.go", "mul.go")
	m, err := e.mg.Open(ctx, SessionConfig{ID: "sess-1", ChangesetRef: "cs-1", View: v})
	if err != nil {
		t.Fatal(err)
	}
	if p := m.Position(); p.State != CodeWriting || p.Mode != Strict {
		t.Fatalf("resumed at %+v", p)
	}
	if err := m.Allowed("fs.write", "mul.go", true); err != nil {
		t.Fatalf("source after resume: %v", err)
	}
	if err := m.Allowed("fs.write", "calc_test.go", true); err == nil {
		t.Fatal("test writable after resume")
	}
	bl, ok, err := e.mg.Budget().Load()
	if err != nil || !ok || bl.Percent != want.Percent || bl.Lock == nil || *bl.Lock != *want.Lock {
		t.Fatalf("budget after resume %+v, want %+v", bl, want)
	}
	if st := m.Status(); !st.Budget.Locked || st.Budget.Baseline != 80 {
		t.Fatalf("status budget %+v", st.Budget)
	}
	// The audit chain is intact and has every transition durable.
	rep, err := e.log.Verify(ctx, true)
	if err != nil || !rep.OK() {
		t.Fatalf("audit verify: %+v %v", rep, err)
	}
	var tos []string
	for _, r := range e.records(audit.EventStateTransition) {
		if r.SessionID == "sess-1" && r.Metadata["refused"] == "" {
			tos = append(tos, r.Metadata["to"])
		}
	}
	if got := strings.Join(tos, " "); got != "idle planning test_writing code_writing code_writing" { // the last one is the resume
		t.Fatalf("audited transitions: %s", got)
	}
	// And the session carries on from where it was killed.
	if _, err := m.RecordTestRun(ctx, goTest(t, v)); err != nil || m.Position().State != Reviewing {
		t.Fatalf("after resume: %v %s", err, m.Position().State)
	}
	// A different changeset for the same session is refused.
	e.mg.Close("sess-1")
	if _, err := e.mg.Open(ctx, SessionConfig{ID: "sess-1", ChangesetRef: "cs-2", View: v}); !uerr.HasCode(err, CodeBadSession) {
		t.Fatalf("other changeset: %v", err)
	}
}

// TestBrokenChainResumesSafe: a damaged state record is a break; the
// session resumes idle in strict mode with the break on record, once.
func TestBrokenChainResumesSafe(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	m, _ := e.session("s", "")
	if _, err := m.SetMode(ctx, ModeRequest{Mode: Explore, Caller: user}); err != nil {
		t.Fatal(err)
	}
	_, _ = m.Start(ctx, "x")
	_, _ = m.PlanComplete(ctx, "p", "ai")
	if m.Position().State != Exploring {
		t.Fatal(m.Position())
	}
	e.close()
	// Flip a byte inside the newest record (exploring, explore mode).
	db, err := store.Open(ctx, store.Options{Dir: store.DefaultDir(e.project)})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(recordKey("s", 4))
		if err != nil {
			return err
		}
		v, _ := item.ValueCopy(nil)
		v[10] ^= 0x20
		return txn.Set(recordKey("s", 4), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	e.open()
	v := &dirView{dir: t.TempDir()}
	m, err = e.mg.Open(ctx, SessionConfig{ID: "s", View: v})
	if err != nil {
		t.Fatal(err)
	}
	if p := m.Position(); p.State != Idle || p.Mode != Strict {
		t.Fatalf("resumed at %+v", p)
	}
	if m.Status().ChangesetRef != "changeset-s" {
		t.Fatalf("changeset ref lost: %+v", m.Status())
	}
	h, _ := m.History(1)
	if len(h) != 1 || h[0].Kind != kindBreak || !strings.Contains(h[0].Note, "record 4 is damaged") {
		t.Fatalf("history %+v", h)
	}
	var breaks int
	for _, r := range e.records(audit.EventStateTransition) {
		if strings.Contains(r.DenyReason, "state chain broken") {
			breaks++
		}
	}
	if breaks != 1 {
		t.Fatalf("%d audited breaks", breaks)
	}
	// The new segment verifies: the next open reports nothing new.
	e.restart()
	if _, err := e.mg.Open(ctx, SessionConfig{ID: "s", View: v}); err != nil {
		t.Fatal(err)
	}
	breaks = 0
	for _, r := range e.records(audit.EventStateTransition) {
		if strings.Contains(r.DenyReason, "state chain broken") {
			breaks++
		}
	}
	if breaks != 1 {
		t.Fatalf("break reported %d times", breaks)
	}
}

// TestUnauditedTransitionDoesNotHappen: when the audit record cannot be
// written, the state stays and no state record remains.
func TestUnauditedTransitionDoesNotHappen(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	m, _ := e.session("s", "")
	if err := e.log.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, "x"); !uerr.HasCode(err, audit.CodeClosed) {
		t.Fatalf("Start with a closed audit log: %v", err)
	}
	if p := m.Position(); p.State != Idle {
		t.Fatalf("state moved to %s", p.State)
	}
	h, err := m.History(0)
	if err != nil || len(h) != 1 || h[0].Kind != kindOpen {
		t.Fatalf("history %+v %v", h, err)
	}
	// The chain still verifies and continues.
	e.log = nil
	e.restart()
	m, err = e.mg.Open(ctx, SessionConfig{ID: "s", View: &dirView{dir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(ctx, "x"); err != nil || m.Position().State != Planning {
		t.Fatalf("after reopen: %v", err)
	}
}

func TestOpenTwiceAndBadIDs(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	_, v := e.session("s", "")
	if _, err := e.mg.Open(ctx, SessionConfig{ID: "s", View: v}); !uerr.HasCode(err, CodeSessionOpen) {
		t.Fatalf("second open: %v", err)
	}
	for _, id := range []string{"", "a/b", "!latest", strings.Repeat("x", 129), "../x"} {
		if _, err := e.mg.Open(ctx, SessionConfig{ID: id, View: v}); !uerr.HasCode(err, CodeBadSession) {
			t.Fatalf("id %q: %v", id, err)
		}
	}
	if _, err := e.mg.Open(ctx, SessionConfig{ID: "t"}); !uerr.HasCode(err, CodeBadSession) {
		t.Fatalf("no view: %v", err)
	}
	if _, ok, err := e.mg.Saved("nope"); ok || err != nil {
		t.Fatalf("Saved(nope) = %v %v", ok, err)
	}
}

// TestGateDuringTransitions: the gate, Status and Explain answer from other
// goroutines while transitions are written (run with -race).
func TestGateDuringTransitions(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	m, _ := e.session("s", "")
	stop := make(chan struct{})
	done := make(chan int)
	for range 4 {
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					done <- n
					return
				default:
				}
				// This session never has a red run: source is never writable.
				if err := m.Allowed("fs.write", "calc.go", true); err == nil {
					panic("source writable without a red run")
				}
				_ = m.Status()
				_ = m.Explain("calc.go")
				n++
			}
		}()
	}
	for range 20 {
		if _, err := m.Start(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.PlanComplete(ctx, "p", "ai"); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Cancel(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	total := 0
	for range 4 {
		total += <-done
	}
	if total == 0 {
		t.Fatal("readers never ran")
	}
}
