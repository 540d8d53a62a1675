package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

type attemptOut struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
	Count int    `json:"count"`
	Data  string `json:"data"`
}

func call(t testing.TB, r *running, name string, args map[string]any, timeout time.Duration) (attemptOut, error) {
	t.Helper()
	b, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := r.tool.Execute(ctx, tool.Call{ID: fmt.Sprint("c", instanceSeq.Add(1)), Tool: name, Args: b, OperationID: "op1"}, nil)
	var out attemptOut
	if err == nil && res.Err == nil {
		if err := json.Unmarshal(res.Output, &out); err != nil {
			t.Fatalf("%s output %s: %v", name, res.Output, err)
		}
	}
	// As the supervisor does after each call: bring /out to the host.
	if r.launched.Collect != nil && err == nil {
		if cerr := r.launched.Collect(ctx); cerr != nil {
			return out, cerr
		}
	}
	if err != nil {
		return attemptOut{}, err
	}
	if res.Err != nil {
		return attemptOut{}, res.Err
	}
	return out, nil
}

func mustCall(t testing.TB, r *running, name string, args map[string]any) attemptOut {
	t.Helper()
	out, err := call(t, r, name, args, 20*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func TestContainerLaunchRoundTripAndCleanup(t *testing.T) {
	needDocker(t)
	spec := newSpec(t, "code-executor")
	r := launch(t, tenv.containers, spec)
	if got := mustCall(t, r, "echo", map[string]any{"text": "hello"}); got.Data != "hello" {
		t.Fatalf("echo = %+v", got)
	}
	who := mustCall(t, r, "whoami", nil)
	if wantUID, _ := GuestIdentity(); !strings.HasPrefix(who.Data, fmt.Sprintf("uid=%d ", wantUID)) {
		t.Fatalf("plugin runs as %q, want uid %d", who.Data, wantUID)
	}
	st := r.launched.Status()
	if st.State != StateRunning || st.ContainerID == "" {
		t.Fatalf("status = %+v", st)
	}
	// The hard settings are what the engine actually applied.
	ctx := context.Background()
	cs, _, err := tenv.rt.Inspect(ctx, st.ContainerID)
	if err != nil || !cs.Running || cs.Labels[LabelKernel] != tenv.lease.KernelID || cs.Labels[LabelSession] != "s-test" {
		t.Fatalf("inspect = %+v, %v", cs, err)
	}
	// Per-operation output directory.
	if _, err := OperationDir(spec.OutDir, "op1"); err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, r, "write_out", map[string]any{"path": "result.txt", "text": "done"}); !got.OK {
		o, _ := exec.Command("ls", "-laR", spec.OutDir).CombinedOutput()
		t.Fatalf("write_out: %+v\n%s", got, o)
	}
	if b, err := os.ReadFile(filepath.Join(spec.OutDir, "op1", "result.txt")); err != nil || string(b) != "done" {
		t.Fatalf("output file: %q %v", b, err)
	}
	r.stop()
	if _, found, _ := tenv.rt.Inspect(ctx, st.ContainerID); found {
		t.Fatalf("container %s still exists after Kill", st.ContainerID)
	}
	if got := r.launched.Status().State; got != StateDestroyed {
		t.Fatalf("state after kill = %s", got)
	}
	ents, _ := os.ReadDir(filepath.Join(tenv.lease.Dir, "sock"))
	for _, e := range ents {
		t.Errorf("socket dir left behind: %s", e.Name())
	}
}

// TestContainment runs one attack per row against an L2 container while a
// second, benign plugin keeps answering.
func TestContainment(t *testing.T) {
	needDocker(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	spec := newSpec(t, "code-executor")
	spec.Limits.Pids = 30
	attacker := launch(t, tenv.containers, spec)
	bystander := launch(t, tenv.containers, newSpec(t, "policy-sandbox"))

	cases := []struct {
		name string
		tool string
		args map[string]any
		want string // substring of the failure
	}{
		{"write workspace", "write_file", map[string]any{"path": "/workspace/main.go"}, "read-only file system"},
		{"write new workspace file", "write_file", map[string]any{"path": "/workspace/new.go"}, "read-only file system"},
		{"write rootfs", "write_file", map[string]any{"path": "/etc/passwd"}, ""},
		{"read host file", "read_file", map[string]any{"path": secret}, "no such file"},
		{"read host shadow", "read_file", map[string]any{"path": "/etc/shadow"}, "no such file"},
		{"tcp to host listener", "tcp", map[string]any{"addr": ln.Addr().String()}, ""},
		{"tcp to internet", "tcp", map[string]any{"addr": "1.1.1.1:443"}, ""},
		{"docker socket", "unix", map[string]any{"path": "/var/run/docker.sock"}, "no such file"},
		{"docker socket /run", "unix", map[string]any{"path": "/run/docker.sock"}, "no such file"},
		{"fork bomb", "forkbomb", map[string]any{"n": 1000}, "resource temporarily unavailable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tool == "forkbomb" {
				// Under a pids limit the attacker's own Go runtime may be the
				// one that cannot get a thread: then it dies, alone, which is
				// containment too. Either way the bystander must answer.
				got, err := call(t, attacker, tc.tool, tc.args, 20*time.Second)
				if err != nil {
					deadline := time.Now().Add(5 * time.Second)
					for !attacker.launched.Status().Exited && time.Now().Before(deadline) {
						time.Sleep(50 * time.Millisecond)
					}
					if !attacker.launched.Status().Exited {
						t.Fatalf("fork bomb broke the connection but the sandbox still runs: %v", err)
					}
				} else if got.OK || !strings.Contains(strings.ToLower(got.Error), tc.want) || got.Count >= 30 {
					t.Fatalf("fork bomb: %+v", got)
				}
				if b := mustCall(t, bystander, "echo", map[string]any{"text": "still here"}); b.Data != "still here" {
					t.Fatalf("bystander: %+v", b)
				}
				return
			}
			got := mustCall(t, attacker, tc.tool, tc.args)
			if got.OK {
				t.Fatalf("attack succeeded: %+v", got)
			}
			if !strings.Contains(strings.ToLower(got.Error), tc.want) {
				t.Fatalf("attack failed with %q, want it to mention %q", got.Error, tc.want)
			}
			if tc.tool == "forkbomb" && got.Count >= 30 {
				t.Fatalf("fork bomb started %d processes past the pids limit 30", got.Count)
			}
			if b := mustCall(t, bystander, "echo", map[string]any{"text": "still here"}); b.Data != "still here" {
				t.Fatalf("bystander: %+v", b)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(spec.Workspace, "main.go")); string(b) != "package main\n" {
		t.Fatalf("workspace file changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(spec.Workspace, "new.go")); !os.IsNotExist(err) {
		t.Fatalf("workspace gained a file: %v", err)
	}
}

func TestOOMIsReportedAndPluginCanRestart(t *testing.T) {
	needDocker(t)
	spec := newSpec(t, "code-executor")
	spec.Limits.MemoryBytes = 64 << 20
	r := launch(t, tenv.containers, spec)
	if _, err := call(t, r, "oom", nil, 60*time.Second); err == nil {
		t.Fatal("allocating past the limit returned no error")
	}
	deadline := time.Now().Add(20 * time.Second)
	for !r.launched.Status().Exited && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	st := r.launched.Status()
	if !st.Exited || !st.OOMKilled {
		t.Fatalf("status = %+v, want exited with OOM", st)
	}
	if st.State != StateFailed && st.State != StateDestroyed {
		t.Fatalf("state = %s, want FAILED", st.State)
	}
	if err := exitError(spec.Name, spec.Limits, exitOf(st), false, ""); !uerr.HasCode(err, "SANDBOX_OOM") {
		t.Fatalf("exit error = %v", err)
	}
	r.stop()
	// Restart policy: a fresh instance of the same plugin works.
	again := launch(t, tenv.containers, newSpec(t, "code-executor"))
	if got := mustCall(t, again, "echo", map[string]any{"text": "back"}); got.Data != "back" {
		t.Fatalf("restarted plugin: %+v", got)
	}
}

func TestOutputFloodIsBounded(t *testing.T) {
	needDocker(t)
	r := launch(t, tenv.containers, newSpec(t, "code-executor"))
	other := launch(t, tenv.containers, newSpec(t, "code-executor"))
	heap := func() uint64 {
		goruntime.GC()
		var m goruntime.MemStats
		goruntime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := call(t, r, "flood", map[string]any{"bytes": 128 << 20}, 2*time.Minute); err != nil {
			t.Errorf("flood: %v", err)
		}
	}()
	// The kernel keeps serving another plugin during the flood.
	for i := 0; i < 20; i++ {
		if got := mustCall(t, other, "echo", map[string]any{"text": "x"}); got.Data != "x" {
			t.Fatalf("echo during flood: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	after := heap()
	if after > before && after-before > 32<<20 {
		t.Fatalf("kernel heap grew by %d MiB during a 128 MiB output flood", (after-before)>>20)
	}
}

func TestHungCallHitsDeadlineThenKillAndRestart(t *testing.T) {
	needDocker(t)
	r := launch(t, tenv.containers, newSpec(t, "code-executor"))
	start := time.Now()
	_, err := call(t, r, "hang", nil, time.Second)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "DeadlineExceeded") {
		t.Fatalf("hung call returned %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("deadline took %s", d)
	}
	id := r.launched.Status().ContainerID
	r.stop()
	if _, found, _ := tenv.rt.Inspect(context.Background(), id); found {
		t.Fatal("hung plugin's container survived Kill")
	}
	again := launch(t, tenv.containers, newSpec(t, "code-executor"))
	if got := mustCall(t, again, "echo", map[string]any{"text": "fresh"}); got.Data != "fresh" {
		t.Fatalf("restart: %+v", got)
	}
}

type recordingAuditor struct {
	mu  sync.Mutex
	evs []NetworkEvent
}

func (a *recordingAuditor) NetworkRequest(_ context.Context, ev NetworkEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
}

func (a *recordingAuditor) events() []NetworkEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]NetworkEvent(nil), a.evs...)
}

func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "echo:%s", line)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestAIProviderReachesAllowedHostOnlyThroughProxy(t *testing.T) {
	needDocker(t)
	allowed, denied := echoServer(t), echoServer(t)
	aud := &recordingAuditor{}
	c, err := NewContainers(context.Background(), ContainersConfig{Runtime: tenv.rt, Lease: tenv.lease, Auditor: aud})
	if err != nil {
		t.Fatal(err)
	}
	spec := newSpec(t, "ai-provider")
	spec.Network = []string{allowed}
	r := launch(t, c, spec)

	got := mustCall(t, r, "proxy_fetch", map[string]any{"addr": allowed, "text": "hi"})
	if !got.OK || got.Data != "echo:hi" {
		t.Fatalf("allowed host through proxy: %+v", got)
	}
	got = mustCall(t, r, "proxy_fetch", map[string]any{"addr": denied, "text": "hi"})
	if got.OK || !strings.Contains(got.Error, "403") || !strings.Contains(got.Error, "allowlist") {
		t.Fatalf("denied host: %+v", got)
	}
	// No way around the proxy: no network interfaces, and strict seccomp
	// refuses AF_INET sockets outright.
	if got := mustCall(t, r, "tcp", map[string]any{"addr": allowed}); got.OK {
		t.Fatalf("direct TCP from ai-provider succeeded")
	}
	evs := aud.events()
	if len(evs) != 2 || !evs[0].Allowed || evs[0].Target != allowed || evs[1].Allowed || evs[1].Plugin != "hostile" {
		t.Fatalf("audit events = %+v", evs)
	}
}

const envHelperKernel = "FLUFFY_SANDBOX_TEST_KERNEL"

// helperKernel is a stand-in kernel process: it leases a kernel id,
// launches runtime-docker and the fixture in a container, prints the
// container id and waits to be SIGKILLed.
func helperKernel() {
	fail := func(err error) { fmt.Println("ERR", err); os.Exit(1) }
	runDir, bin, adapter := os.Getenv("RUN_DIR"), os.Getenv("HOSTILE_BIN"), os.Getenv("ADAPTER_BIN")
	tenv.hostile = bin
	lease, err := AcquireLease(runDir, os.Getenv(envHelperKernel))
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	_, c, err := launchRuntime(ctx, lease, adapter, "")
	if err != nil {
		fail(err)
	}
	cs, err := NewContainers(ctx, ContainersConfig{Runtime: c, Lease: lease})
	if err != nil {
		fail(err)
	}
	spec := LaunchSpec{Name: "hostile", Kind: "tool", Binary: bin, Template: "code-executor", SessionID: "s-orphan", InstanceID: "orphan"}
	r, err := launchErr(cs, spec)
	if err != nil {
		fail(err)
	}
	fmt.Println("CONTAINER", r.launched.Status().ContainerID)
	select {}
}

func TestKilledKernelLeavesNoRunningContainerAndIsReaped(t *testing.T) {
	needDocker(t)
	kid := NewKernelID()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelperKernel+"="+kid, "RUN_DIR="+tenv.runDir, "HOSTILE_BIN="+tenv.hostile, "ADAPTER_BIN="+tenv.adapter)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var id string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "CONTAINER "); ok {
			id = v
			break
		}
		if strings.HasPrefix(line, "ERR") {
			t.Fatalf("helper kernel: %s", line)
		}
	}
	if id == "" {
		t.Fatal("helper kernel printed no container id")
	}
	t.Cleanup(func() { _ = tenv.rt.Remove(context.Background(), id, true, true) })
	if !KernelAlive(tenv.runDir, kid) {
		t.Fatal("helper kernel's lease is not held")
	}
	ctx := context.Background()
	if st, _, _ := tenv.rt.Inspect(ctx, id); !st.Running {
		t.Fatalf("container not running before the kill: %+v", st)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	killed := time.Now()
	for {
		st, found, err := tenv.rt.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !found || !st.Running {
			t.Logf("orphan container state: %s exit=%d", st.Status, st.ExitCode)
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("container still running %s after its kernel was SIGKILLed", time.Since(killed))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("orphaned container stopped %s after the kernel died", time.Since(killed).Round(time.Millisecond))
	if KernelAlive(tenv.runDir, kid) {
		t.Fatal("dead kernel still counts as alive")
	}
	inv, err := Inventory(ctx, tenv.rt, tenv.runDir)
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, res := range inv {
		if res.ID == id {
			seen = true
			if !res.Orphan() {
				t.Fatalf("dead kernel's container not marked orphan: %+v", res)
			}
		}
		if res.KernelID == tenv.lease.KernelID && res.Orphan() {
			t.Fatalf("live kernel's container marked orphan: %+v", res)
		}
	}
	if !seen {
		t.Fatal("inventory misses the orphan")
	}
	rep, err := Reap(ctx, tenv.rt, tenv.runDir, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := tenv.rt.Inspect(ctx, id); found {
		t.Fatalf("reap left the orphan container (report %+v)", rep)
	}
	if _, err := os.Stat(filepath.Join(tenv.runDir, kid)); !os.IsNotExist(err) {
		t.Fatalf("reap left the dead kernel's run dir: %v", err)
	}
	if _, err := os.Stat(tenv.lease.Dir); err != nil {
		t.Fatalf("reap removed the live kernel's run dir: %v", err)
	}
}

func TestEngineUnreachableIsStructured(t *testing.T) {
	lease, err := AcquireLease(t.TempDir(), NewKernelID())
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	_, _, err = launchRuntime(context.Background(), lease, tenv.adapter, filepath.Join(t.TempDir(), "nope.sock"))
	if !uerr.HasCode(err, "RUNTIME_UNREACHABLE") {
		t.Fatalf("err = %v", err)
	}
	e := uerr.From(err)
	// Podman's Docker-compatible API cannot run the L2 sandboxes (it takes
	// a seccomp profile as a path), so it is not offered as a fix.
	if !strings.Contains(e.Fix, "apt install docker.io") || strings.Contains(e.Fix, "podman") || e.Why == "" {
		t.Fatalf("guidance missing: %+v", e)
	}
}

func TestBwrapRuntimeContainsPlugin(t *testing.T) {
	if _, err := BwrapUsable(); err != nil {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("bubblewrap unusable in CI: %v", err)
		}
		t.Skipf("bubblewrap unusable: %v", err)
	}
	spec := newSpec(t, "code-executor")
	r := launch(t, &Bwrap{Lease: tenv.lease}, spec)
	if got := mustCall(t, r, "echo", map[string]any{"text": "jailed"}); got.Data != "jailed" {
		t.Fatalf("echo: %+v", got)
	}
	for _, tc := range []struct{ tool, arg, val string }{
		{"write_file", "path", "/workspace/main.go"},
		{"read_file", "path", "/etc/hostname"},
		{"tcp", "addr", "1.1.1.1:443"},
		{"unix", "path", "/var/run/docker.sock"},
	} {
		if got := mustCall(t, r, tc.tool, map[string]any{tc.arg: tc.val}); got.OK {
			t.Errorf("%s %s succeeded inside bwrap", tc.tool, tc.val)
		}
	}
}

// TestReapTouchesOnlyItsOwnHome: two kernels of two homes share one engine.
// Each home's reaper (and `gc --all`) must leave the other's live
// containers alone, although the other's lease is not visible to it.
func TestReapTouchesOnlyItsOwnHome(t *testing.T) {
	needDocker(t)
	ctx := context.Background()
	// Home B: its own run directory, owner id and live lease.
	short, err := os.MkdirTemp("", "fh") // socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	_ = os.Chmod(short, 0o755)
	otherRun := filepath.Join(short, "run")
	otherLease, err := AcquireLease(otherRun, NewKernelID())
	if err != nil {
		t.Fatal(err)
	}
	defer otherLease.Release()
	if otherLease.Owner == tenv.lease.Owner || otherLease.Owner == "" {
		t.Fatalf("owners not distinct: %q vs %q", otherLease.Owner, tenv.lease.Owner)
	}
	otherCs, err := NewContainers(ctx, ContainersConfig{Runtime: tenv.rt, Lease: otherLease})
	if err != nil {
		t.Fatal(err)
	}
	theirs := launch(t, otherCs, newSpec(t, "code-executor"))
	mine := launch(t, tenv.containers, newSpec(t, "code-executor"))

	// Home A reaps, then garbage-collects everything of its own.
	for _, all := range []bool{false, true} {
		if all {
			mine.stop() // --all would remove our own live one; keep the test's client sane
		}
		rep, err := Reap(ctx, tenv.rt, tenv.runDir, all)
		if err != nil {
			t.Fatalf("reap(all=%v): %v", all, err)
		}
		for _, n := range rep.Containers {
			if n == containerName(theirs.spec) {
				t.Fatalf("home A's reap (all=%v) removed home B's live container %s", all, n)
			}
		}
		if got := mustCall(t, theirs, "echo", map[string]any{"text": "alive"}); got.Data != "alive" {
			t.Fatalf("home B's plugin after home A's reap(all=%v): %+v", all, got)
		}
	}
	inv, err := Inventory(ctx, tenv.rt, tenv.runDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range inv {
		if res.ID == theirs.launched.Status().ContainerID && (res.Mine || res.Orphan()) {
			t.Fatalf("home B's container judged from home A: %+v", res)
		}
	}
	// Home B's own reaper sees its live kernel and keeps it too.
	if _, err := Reap(ctx, tenv.rt, otherRun, false); err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, theirs, "echo", map[string]any{"text": "still"}); got.Data != "still" {
		t.Fatalf("home B's plugin after its own reap: %+v", got)
	}
}

// TestContainerKilledFromOutsideIsReportedAsSuch: docker kill on a live
// plugin's container is not the plugin crashing.
func TestContainerKilledFromOutsideIsReportedAsSuch(t *testing.T) {
	needDocker(t)
	r := launch(t, tenv.containers, newSpec(t, "code-executor"))
	id := r.launched.Status().ContainerID
	if err := tenv.rt.Kill(context.Background(), id, "SIGKILL"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !r.launched.Status().Exited && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	st := r.launched.Status()
	if !st.Exited || !st.External {
		t.Fatalf("status = %+v, want exited from outside", st)
	}
	err := st.ExitError(r.spec.Name, r.spec.Limits)
	if !uerr.HasCode(err, CodeKilledExternally) || !strings.Contains(uerr.From(err).Why, "something other than fluffy") {
		t.Fatalf("exit error = %v", err)
	}
	// Our own kill is not external.
	own := launch(t, tenv.containers, newSpec(t, "code-executor"))
	own.stop()
	if st := own.launched.Status(); st.External {
		t.Fatalf("kernel's own stop reported as external: %+v", st)
	}
}

// allowOnly is a NetworkPolicy allowing exactly one target.
type allowOnly string

func (a allowOnly) AllowHost(target string) (bool, string) {
	if target == string(a) {
		return true, ""
	}
	return false, "host not in the test policy's network_whitelist"
}

// TestContainerProxyAsksTheNetworkPolicy: the container launcher's proxy
// asks ContainersConfig.NetworkPolicy as well as the manifest: a host the
// manifest declares but the policy does not allow is refused, saying so.
func TestContainerProxyAsksTheNetworkPolicy(t *testing.T) {
	needDocker(t)
	both, manifestOnly := echoServer(t), echoServer(t)
	c, err := NewContainers(context.Background(), ContainersConfig{Runtime: tenv.rt, Lease: tenv.lease, NetworkPolicy: allowOnly(both)})
	if err != nil {
		t.Fatal(err)
	}
	spec := newSpec(t, "ai-provider")
	spec.Network = []string{both, manifestOnly}
	r := launch(t, c, spec)
	if got := mustCall(t, r, "proxy_fetch", map[string]any{"addr": both, "text": "hi"}); !got.OK || got.Data != "echo:hi" {
		t.Fatalf("declared and allowed: %+v", got)
	}
	got := mustCall(t, r, "proxy_fetch", map[string]any{"addr": manifestOnly, "text": "hi"})
	if got.OK || !strings.Contains(got.Error, "403") || !strings.Contains(got.Error, "network_whitelist") {
		t.Fatalf("declared but not allowed by the policy: %+v", got)
	}
}
