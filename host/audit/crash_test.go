package audit

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	envCrashChild = "FLUFFY_AUDIT_CRASH_CHILD_DIR"
	envCrashAcks  = "FLUFFY_AUDIT_CRASH_CHILD_ACKS"
)

// TestMain doubles as the crash test's child process: with envCrashChild
// set, the test binary appends events until it is killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv(envCrashChild); dir != "" {
		os.Exit(crashChild(dir, os.Getenv(envCrashAcks)))
	}
	os.Exit(m.Run())
}

// crashChild appends from 4 goroutines: one appends security events
// (capability_issued), three append operational events (syscall). After Append returns
// it writes "s|o <id> <unix ns>" to the acks file with one write(2), so the
// line survives SIGKILL exactly when the append was acknowledged.
func crashChild(dir, acks string) int {
	l, err := Open(context.Background(), Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		return 3
	}
	f, err := os.OpenFile(acks, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child acks:", err)
		return 3
	}
	fmt.Println("ready")
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				ev, kind := Event{Type: EventSyscall, Caller: "tool-fs", Input: "fs.read /workspace/x"}, "o"
				if g == 0 {
					ev, kind = Event{Type: EventCapabilityIssued, CapabilityID: fmt.Sprintf("cap-%d-%d", g, i)}, "s"
				}
				r, err := l.Append(context.Background(), ev)
				if err != nil {
					fmt.Fprintln(os.Stderr, "child append:", err)
					os.Exit(4)
				}
				if _, err := f.WriteString(fmt.Sprintf("%s %d %d\n", kind, r.ID, time.Now().UnixNano())); err != nil {
					os.Exit(5)
				}
				if g != 0 && i%10 == 9 {
					time.Sleep(time.Millisecond) // ~10k events/s per goroutine: a busy kernel, not a flood
				}
			}
		}(g)
	}
	wg.Wait()
	return 0
}

// TestCrashLosesNoAcknowledgedSecurityEvent SIGKILLs a child process that is
// appending, at a random moment, 20 times over the same database. After each
// kill the database opens, the chain verifies, every acknowledged security
// event is present, and the operational events that are missing were all
// appended within the flush interval (500 ms) before the kill.
func TestCrashLosesNoAcknowledgedSecurityEvent(t *testing.T) {
	const rounds = 20
	// The log makes appenders wait once the oldest unwritten record is
	// FlushInterval (500 ms) old, so a lost operational event is at most
	// 500 ms older than the newest acknowledged event; 250 ms of slack covers
	// the child stamping its acks a little after Append returns on a loaded
	// machine.
	const flushBound = 500*time.Millisecond + 250*time.Millisecond
	dir := dbDir(t)
	tmp := t.TempDir()
	ctx := context.Background()
	totalSec, totalLost := 0, 0
	for round := 0; round < rounds; round++ {
		acks := filepath.Join(tmp, fmt.Sprintf("acks-%d", round))
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envCrashChild+"="+dir, envCrashAcks+"="+acks)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		must(t, err)
		must(t, cmd.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("round %d: child did not start: %q %v", round, line, err)
		}
		time.Sleep(time.Duration(50+rand.IntN(700)) * time.Millisecond)
		killedAt := time.Now()
		must(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		sec, ops, lastAck := readAcks(t, acks)
		l := openLog(t, dir, nil)
		if st := l.StartupReport(); !st.OK() {
			l.Close()
			t.Fatalf("round %d: startup found a break after SIGKILL: %+v", round, st)
		}
		rep, err := l.Verify(ctx, true)
		if err != nil || !rep.OK() {
			l.Close()
			t.Fatalf("round %d: chain does not verify after SIGKILL: %+v %v", round, rep, err)
		}
		if brk, _ := l.Recent(ctx, 1, EventAuditChainBreak); len(brk) != 0 {
			l.Close()
			t.Fatalf("round %d: a chain break was recorded: %+v", round, brk)
		}
		for _, id := range sec {
			if id > rep.ToID {
				l.Close()
				t.Fatalf("round %d: acknowledged security event %d is missing (newest stored %d)", round, id, rep.ToID)
			}
		}
		lost := 0
		for id, at := range ops {
			if id <= rep.ToID {
				continue
			}
			lost++
			if age := lastAck.Sub(at); age > flushBound {
				l.Close()
				t.Fatalf("round %d: operational event %d appended %s before the last acknowledged event (%s before the kill) is lost (bound %s)",
					round, id, age, killedAt.Sub(at), flushBound)
			}
		}
		t.Logf("round %d: killed after acking %d security and %d operational events; newest stored id %d; %d operational lost", round, len(sec), len(ops), rep.ToID, lost)
		totalSec += len(sec)
		totalLost += lost
		must(t, l.Close())
	}
	if totalSec < rounds {
		t.Fatalf("only %d security events acknowledged in %d rounds: security appends are starved", totalSec, rounds)
	}
	t.Logf("%d rounds: %d acknowledged security events all present; %d recent operational events lost", rounds, totalSec, totalLost)
}

func readAcks(t *testing.T, path string) (sec []uint64, ops map[uint64]time.Time, last time.Time) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	ops = map[uint64]time.Time{}
	for _, ln := range strings.Split(string(b), "\n") {
		f := strings.Fields(ln)
		if len(f) != 3 {
			continue // the line the kill cut short
		}
		id, err1 := strconv.ParseUint(f[1], 10, 64)
		ns, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || len(f[2]) != len(strconv.FormatInt(time.Now().UnixNano(), 10)) {
			continue // a line the kill cut short
		}
		if at := time.Unix(0, ns); at.After(last) {
			last = at
		}
		if f[0] == "s" {
			sec = append(sec, id)
		} else {
			ops[id] = time.Unix(0, ns)
		}
	}
	return sec, ops, last
}
