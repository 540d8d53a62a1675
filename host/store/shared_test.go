package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// The test binary doubles as the other process: with these variables set,
// TestHelperHoldDatabase opens the database, says "ready" and holds it
// until its stdin closes (or for FLUFFY_STORE_HOLD_FOR).
const (
	envHoldDir     = "FLUFFY_STORE_HOLD_DIR"
	envHoldProject = "FLUFFY_STORE_HOLD_PROJECT"
	envHoldCommand = "FLUFFY_STORE_HOLD_COMMAND"
	envHoldFor     = "FLUFFY_STORE_HOLD_FOR"
	envHoldNoRec   = "FLUFFY_STORE_HOLD_NO_RECORD"
)

func TestHelperHoldDatabase(t *testing.T) {
	dir := os.Getenv(envHoldDir)
	if dir == "" {
		return // not the helper process: nothing to do
	}
	db, err := Open(context.Background(), Options{Dir: dir, Holder: Holder{Project: os.Getenv(envHoldProject), Command: os.Getenv(envHoldCommand)}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	if os.Getenv(envHoldNoRec) != "" {
		// An older fluffy, or another program: no holder record.
		_ = os.Remove(filepath.Join(dir, HolderFile))
	}
	fmt.Println("ready")
	if d, _ := time.ParseDuration(os.Getenv(envHoldFor)); d > 0 {
		time.Sleep(d)
	} else {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	}
	_ = db.Close()
	os.Exit(0)
}

// holdIn starts another process that holds the database in dir; it lets go
// when stop is called (or after holdFor, when set).
func holdIn(t *testing.T, dir string, env ...string) (pid int, stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldDatabase$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), envHoldDir+"="+dir), env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("holder process: %q", line)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = in.Close()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return cmd.Process.Pid, stop
}

// TestLockErrorNamesHolder: a database another process holds is reported
// as STORE_LOCKED naming that process (pid, project, what it is) and how
// to have it let go.
func TestLockErrorNamesHolder(t *testing.T) {
	for _, tc := range []struct {
		name, label       string
		env               []string
		wantWhat, wantFix string
		wantWhy           []string
	}{
		{
			name: "kernel holds the project database", env: []string{envHoldProject + "=/src/proj a", envHoldCommand + "=fluffy kernel"},
			wantWhat: "the project database is in use", wantWhy: []string{"fluffy kernel (pid %d, project /src/proj a)", " since "},
			wantFix: "`fluffy kernel stop --project /src/proj a`",
		},
		{
			name: "plugin CLI holds the home database", label: "home database", env: []string{envHoldCommand + "=fluffy plugin install"},
			wantWhat: "the home database is in use", wantWhy: []string{"fluffy plugin install (pid %d)"},
			wantFix: "stop process %d",
		},
		{
			name: "no holder record: badger's pid", env: []string{envHoldNoRec + "=1"},
			wantWhat: "the project database is in use", wantWhy: []string{"(pid %d)"}, wantFix: "stop process %d",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			pid, stop := holdIn(t, dir, tc.env...)
			_, err := Open(context.Background(), Options{Dir: dir, Label: tc.label})
			ue, ok := uerr.As(err)
			if !ok || ue.Code != CodeLocked {
				t.Fatalf("Open while held: %v, want %s", err, CodeLocked)
			}
			if !strings.Contains(ue.What, tc.wantWhat+": "+dir) {
				t.Errorf("what = %q", ue.What)
			}
			for _, w := range tc.wantWhy {
				if w = strings.ReplaceAll(w, "%d", strconv.Itoa(pid)); !strings.Contains(ue.Why, w) {
					t.Errorf("why = %q, want it to contain %q", ue.Why, w)
				}
			}
			if w := strings.ReplaceAll(tc.wantFix, "%d", strconv.Itoa(pid)); !strings.Contains(ue.Fix, w) {
				t.Errorf("fix = %q, want it to contain %q", ue.Fix, w)
			}
			stop()
			db, err := Open(context.Background(), Options{Dir: dir})
			if err != nil {
				t.Fatalf("open after the holder let go: %v", err)
			}
			if h, err := ReadHolder(dir); err != nil || h.PID != os.Getpid() {
				t.Errorf("holder while this process has it: %+v %v", h, err)
			}
			db.Close()
			if _, err := os.Stat(filepath.Join(dir, HolderFile)); !os.IsNotExist(err) {
				t.Errorf("holder record left after Close: %v", err)
			}
		})
	}
}

func sharedKey(w, i int) []byte { return []byte(fmt.Sprintf("t/%d/%04d", w, i)) }

// TestSharedWaitsForTheOtherProcess: Acquire waits while another process
// holds the database and gets it once that one lets go; past the bound it
// fails with STORE_LOCKED naming the holder.
func TestSharedWaitsForTheOtherProcess(t *testing.T) {
	for _, tc := range []struct {
		name     string
		holdFor  time.Duration
		wait     time.Duration
		wantLock bool
	}{
		{name: "holder lets go within the bound", holdFor: 700 * time.Millisecond, wait: 20 * time.Second},
		{name: "holder keeps it past the bound", wait: 300 * time.Millisecond, wantLock: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			var env []string
			if tc.holdFor > 0 {
				env = append(env, envHoldFor+"="+tc.holdFor.String())
			}
			pid, _ := holdIn(t, dir, append(env, envHoldCommand+"=fluffy kernel", envHoldProject+"=/p")...)
			s := NewShared(SharedOptions{Options: Options{Dir: dir, Label: "home database"}, Wait: tc.wait, Linger: -1})
			start := time.Now()
			err := s.Update(func(txn *badger.Txn) error { return txn.Set([]byte("t/k"), []byte("v")) })
			took := time.Since(start)
			if tc.wantLock {
				ue, ok := uerr.As(err)
				if !ok || ue.Code != CodeLocked || !strings.Contains(ue.Why, fmt.Sprintf("pid %d", pid)) || !strings.Contains(ue.Why, "waited") {
					t.Fatalf("Update past the bound: %v", err)
				}
				if took < tc.wait {
					t.Fatalf("gave up after %s, before the %s bound", took, tc.wait)
				}
				return
			}
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if s.Open() {
				t.Fatal("database still open after the only use (Linger < 0)")
			}
		})
	}
}

// TestSharedConcurrentUse: goroutines of one process share one handle;
// it is closed after Linger, and then another process can open it.
func TestSharedConcurrentUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	s := NewShared(SharedOptions{Options: Options{Dir: dir}, Linger: 50 * time.Millisecond})
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := s.Update(func(txn *badger.Txn) error { return txn.Set(sharedKey(w, i), []byte("v")) }); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := s.View(func(txn *badger.Txn) error {
		for w := range workers {
			for i := range each {
				if _, err := txn.Get(sharedKey(w, i)); err == nil {
					n++
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != workers*each {
		t.Fatalf("%d of %d keys", n, workers*each)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Open() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s.Open() {
		t.Fatal("still open long after Linger")
	}
	_, stop := holdIn(t, dir)
	stop()
}

// BenchmarkSharedUpdate is the cost of one registry-sized write when every
// operation opens and closes the database (Linger < 0, as when operations
// are further apart than the linger) and when a burst shares one open.
func BenchmarkSharedUpdate(b *testing.B) {
	for _, bc := range []struct {
		name   string
		linger time.Duration
	}{{"open-per-op", -1}, {"lingering", time.Second}} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewShared(SharedOptions{Options: Options{Dir: filepath.Join(b.TempDir(), "db")}, Linger: bc.linger})
			defer s.Close()
			for i := 0; b.Loop(); i++ {
				if err := s.Update(func(txn *badger.Txn) error { return appendLike(txn, i) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// appendLike writes what an audit append writes: a new record key and the
// head mark every write rewrites.
func appendLike(txn *badger.Txn, i int) error {
	if err := txn.Set([]byte("t/head"), []byte(fmt.Sprint(i))); err != nil {
		return err
	}
	return txn.Set(sharedKey(0, i), []byte("v"))
}

// TestSharedKeepsTablesFew: a database opened and closed for every write
// does not pile up one level-0 table per close (without compaction at
// close it had one table per operation, and every open checks them all).
func TestSharedKeepsTablesFew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	s := NewShared(SharedOptions{Options: Options{Dir: dir}, Linger: -1})
	const ops = 20
	for i := range ops {
		if err := s.Update(func(txn *badger.Txn) error { return appendLike(txn, i) }); err != nil {
			t.Fatal(err)
		}
	}
	if s.Open() {
		t.Fatal("open after the last use with Linger < 0")
	}
	if n := len(files(t, dir, "sst")); n > 3 {
		t.Fatalf("%d tables after %d open-write-close rounds", n, ops)
	}
	db, err := Open(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	_ = db.View(func(txn *badger.Txn) error {
		for i := range ops {
			if _, err := txn.Get(sharedKey(0, i)); err == nil {
				n++
			}
		}
		return nil
	})
	if n != ops {
		t.Fatalf("%d of %d keys", n, ops)
	}
}
