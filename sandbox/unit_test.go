package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/runtime"
)

func TestTemplatesMatchSeed000(t *testing.T) {
	cases := []struct {
		name    string
		net     string
		seccomp string
		mem     int64
		cpus    float64
		pids    int
		timeout time.Duration
	}{
		{"ai-provider", NetProxy, SeccompStrict, 256 << 20, 0.5, 16, 120 * time.Second},
		{"code-executor", NetNone, SeccompStandard, 1 << 30, 1, 100, 300 * time.Second},
		{"policy-sandbox", NetNone, SeccompStrict, 128 << 20, 0.25, 16, 100 * time.Millisecond},
		{"integration-test", NetProxy, SeccompStandardNet, 1 << 30, 1, 100, 300 * time.Second},
	}
	for _, c := range cases {
		tp, err := LookupTemplate(c.name)
		if err != nil {
			t.Fatal(err)
		}
		l := tp.Limits
		if tp.Network != c.net || tp.Seccomp != c.seccomp || l.MemoryBytes != c.mem || l.CPUs != c.cpus || l.Pids != c.pids || l.Timeout != c.timeout {
			t.Errorf("%s = %+v", c.name, tp)
		}
		if _, err := SeccompProfile(tp.Seccomp); err != nil {
			t.Error(err)
		}
	}
	if _, err := LookupTemplate("yolo"); !uerr.HasCode(err, "SANDBOX_UNKNOWN_TEMPLATE") {
		t.Fatalf("unknown template: %v", err)
	}
	tp, _ := LookupTemplate("code-executor")
	eff := tp.Effective(Limits{MemoryBytes: 64 << 20, Pids: 1000})
	if eff.MemoryBytes != 64<<20 || eff.Pids != 100 {
		t.Fatalf("a manifest may tighten but not loosen: %+v", eff)
	}
}

func TestSeccompProfiles(t *testing.T) {
	type rule struct {
		Names  []string `json:"names"`
		Action string   `json:"action"`
		Args   []struct {
			Value uint64 `json:"value"`
			Op    string `json:"op"`
		} `json:"args"`
	}
	type profile struct {
		DefaultAction string `json:"defaultAction"`
		Syscalls      []rule `json:"syscalls"`
	}
	allowed := func(p profile, name string) []rule {
		var out []rule
		for _, r := range p.Syscalls {
			for _, n := range r.Names {
				if n == name && r.Action == "SCMP_ACT_ALLOW" {
					out = append(out, r)
				}
			}
		}
		return out
	}
	for _, name := range []string{SeccompStrict, SeccompStandard, SeccompStandardNet} {
		js, err := SeccompProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		var p profile
		if err := json.Unmarshal([]byte(js), &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.DefaultAction != "SCMP_ACT_ERRNO" {
			t.Errorf("%s: default %s, want deny", name, p.DefaultAction)
		}
		for _, banned := range []string{"ptrace", "mount", "umount2", "setuid", "unshare", "setns", "bpf", "keyctl", "init_module", "reboot"} {
			if len(allowed(p, banned)) > 0 {
				t.Errorf("%s allows %s", name, banned)
			}
		}
		forks := len(allowed(p, "fork")) > 0
		if forks != (name != SeccompStrict) {
			t.Errorf("%s: fork allowed = %v", name, forks)
		}
		// Profiles that run code let the plugin confine it with Landlock
		// (tool-test keeps test binaries away from the build cache).
		for _, ll := range []string{"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"} {
			if got := len(allowed(p, ll)) > 0; got != (name != SeccompStrict) {
				t.Errorf("%s: %s allowed = %v", name, ll, got)
			}
		}
		var families []uint64
		for _, r := range allowed(p, "socket") {
			families = append(families, r.Args[0].Value)
		}
		want := []uint64{1}
		if name == SeccompStandardNet {
			want = []uint64{1, 2, 10}
		}
		if fmt.Sprint(families) != fmt.Sprint(want) {
			t.Errorf("%s: socket families %v, want %v", name, families, want)
		}
	}
	if _, err := SeccompProfile("lax"); !uerr.HasCode(err, "SANDBOX_UNKNOWN_SECCOMP") {
		t.Fatal(err)
	}
}

func TestLifecycle(t *testing.T) {
	cases := []struct {
		name  string
		steps []State
		fail  bool
		want  []State
	}{
		{"normal", []State{StateRunning}, false, []State{StateCreating, StateRunning, StateStopping, StateCleanup, StateDestroyed}},
		{"create failed", nil, true, []State{StateCreating, StateFailed, StateCleanup, StateDestroyed}},
		{"crash while running", []State{StateRunning}, true, []State{StateCreating, StateRunning, StateFailed, StateCleanup, StateDestroyed}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := NewLifecycle()
			for _, s := range c.steps {
				if err := l.To(s); err != nil {
					t.Fatal(err)
				}
			}
			if c.fail {
				l.Fail("boom")
			}
			ran := 0
			l.OnCleanup("a", func() error { ran++; return errors.New("a failed") })
			l.OnCleanup("b", func() error { ran++; panic("b panicked") })
			l.OnCleanup("c", func() error { ran++; return nil })
			err := l.Cleanup()
			if ran != 3 {
				t.Fatalf("ran %d steps, want all 3 despite failures", ran)
			}
			if err == nil || !strings.Contains(err.Error(), "a failed") || !strings.Contains(err.Error(), "b panicked") {
				t.Fatalf("cleanup error = %v", err)
			}
			if err2 := l.Cleanup(); ran != 3 || err2 == nil {
				t.Fatalf("second cleanup re-ran steps (%d) or lost the error", ran)
			}
			if got := fmt.Sprint(l.History()); got != fmt.Sprint(c.want) {
				t.Fatalf("history %s, want %v", got, c.want)
			}
		})
	}
	l := NewLifecycle()
	if err := l.To(StateDestroyed); !errors.Is(err, ErrBadTransition) {
		t.Fatalf("CREATING → DESTROYED allowed: %v", err)
	}
}

func TestAddrTranslator(t *testing.T) {
	r := &containerRunner{spec: LaunchSpec{Name: "p"}, hostSock: "/run/k/sock/plugin-dir123"}
	cases := []struct {
		dir, net, addr, want string
		ok                   bool
	}{
		{"p2h", "unix", GuestSocketDir + "/plugin42", "/run/k/sock/plugin-dir123/plugin42", true},
		{"p2h", "unix", "/etc/passwd", "", false},
		{"p2h", "unix", GuestSocketDir + "/../x", "", false},
		{"p2h", "tcp", "127.0.0.1:1234", "", false},
		{"h2p", "unix", "/run/k/sock/plugin-dir123/broker7", GuestSocketDir + "/broker7", true},
		{"h2p", "unix", "/run/k/other/broker7", "", false},
		{"h2p", "tcp", "127.0.0.1:1", "", false},
	}
	for _, c := range cases {
		var got string
		var err error
		if c.dir == "p2h" {
			_, got, err = r.PluginToHost(c.net, c.addr)
		} else {
			_, got, err = r.HostToPlugin(c.net, c.addr)
		}
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("%s(%s %s) = %q, %v", c.dir, c.net, c.addr, got, err)
		}
	}
}

func TestLeases(t *testing.T) {
	dir := t.TempDir()
	l, err := AcquireLease(dir, "kabc")
	if err != nil {
		t.Fatal(err)
	}
	if !KernelAlive(dir, "kabc") {
		t.Fatal("held lease reads as dead")
	}
	if _, err := AcquireLease(dir, "kabc"); err == nil {
		t.Fatal("a second kernel took the same lease")
	}
	for _, bad := range []string{"", "../x", "a/b"} {
		if _, err := AcquireLease(dir, bad); err == nil {
			t.Errorf("lease id %q accepted", bad)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if KernelAlive(dir, "kabc") || KernelAlive(dir, "never") {
		t.Fatal("released or unknown kernel reads as alive")
	}
}

func TestBaseImageIsDeterministic(t *testing.T) {
	a, err := BaseImageTar()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := BaseImageTar()
	if BaseImageRef(a) != BaseImageRef(b) || !strings.HasPrefix(BaseImageRef(a), "fluffy-l2-base:") {
		t.Fatal("base image tar is not deterministic")
	}
}

func TestOperationDirRejectsEscapes(t *testing.T) {
	out := t.TempDir()
	for _, bad := range []string{"", "..", "a/b", "../x", "."} {
		if _, err := OperationDir(out, bad); !uerr.HasCode(err, "SANDBOX_BAD_OPERATION_ID") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if d, err := OperationDir(out, "op-1"); err != nil || d != filepath.Join(out, "op-1") {
		t.Fatal(d, err)
	}
}

func TestProxyRefusesWithoutDocker(t *testing.T) {
	allowed := echoServer(t)
	aud := &recordingAuditor{}
	p, err := StartProxy(filepath.Join(t.TempDir(), "px"), ProxyConfig{Plugin: "prov", Instance: "i1", Allow: []string{allowed}, Auditor: aud})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Setenv(runtime.EnvProxySocket, p.Socket())
	c, err := runtime.DialViaProxy(t.Context(), "tcp", allowed)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "hi\n")
	buf := make([]byte, 16)
	n, _ := c.Read(buf)
	c.Close()
	if string(buf[:n]) != "echo:hi\n" {
		t.Fatalf("tunnel answered %q", buf[:n])
	}
	if _, err := runtime.DialViaProxy(t.Context(), "tcp", "example.com:443"); err == nil || !strings.Contains(err.Error(), "allowlist") {
		t.Fatalf("denied host: %v", err)
	}
	// Plain HTTP requests are refused: CONNECT only.
	raw, _ := net.Dial("unix", p.Socket())
	fmt.Fprintf(raw, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", allowed, allowed)
	n, _ = raw.Read(buf)
	raw.Close()
	if !strings.Contains(string(buf[:n]), "405") {
		t.Fatalf("GET through proxy: %q", buf[:n])
	}
	evs := aud.events()
	if len(evs) != 3 || !evs[0].Allowed || evs[1].Allowed || evs[2].Allowed {
		t.Fatalf("audit = %+v", evs)
	}
}

func TestContainerNamesDifferPerInstance(t *testing.T) {
	for _, name := range []string{"tool-fs", "tool-search", "a-very-long-plugin-name"} {
		a := containerName(LaunchSpec{Name: name, InstanceID: name + "-0123456789abcdef"})
		b := containerName(LaunchSpec{Name: name, InstanceID: name + "-fedcba9876543210"})
		if a == b {
			t.Errorf("two instances of %s share the container name %q", name, a)
		}
	}
	if n := containerName(LaunchSpec{Name: "x", InstanceID: "other/id"}); n != "fluffy-x-other-id" {
		t.Errorf("foreign instance id: %q", n)
	}
}

// TestExitErrorTellsEngineLossFromAKill: a wait that ended without an exit
// status (the engine went away) is not reported as a container someone
// killed: the fix is about the engine, not about what stops containers.
func TestExitErrorTellsEngineLossFromAKill(t *testing.T) {
	for _, tc := range []struct {
		ex   runtime.Exit
		code string
	}{
		{runtime.Exit{Code: -1}, CodeEngineLost},
		{runtime.Exit{Code: -1, Error: "rpc error: EOF"}, CodeEngineLost},
		{runtime.Exit{Code: 137}, CodeKilledExternally},
		{runtime.Exit{Code: -1, Error: "wait abc: Error response from daemon: No such container: abc"}, CodeKilledExternally},
	} {
		err := exitError("tool-test", Limits{}, tc.ex, true, "")
		if !uerr.HasCode(err, tc.code) {
			t.Fatalf("exit %+v: %v, want %s", tc.ex, err, tc.code)
		}
		if tc.code == CodeEngineLost && !strings.Contains(uerr.From(err).Fix, "docker info") {
			t.Fatalf("the engine-lost fix does not say how to check the engine: %q", uerr.From(err).Fix)
		}
	}
}
