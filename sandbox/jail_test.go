package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestAdapterRunsInsideItsJail looks at the runtime adapter every test of
// this package uses from the outside, through /proc: it must be a process
// in mount, pid, network, IPC and UTS namespaces of its own, with no
// capabilities, whose root holds /plugin but none of the host's /etc,
// /usr or /home. A silent fallback to a plain subprocess fails here.
// Without bubblewrap it skips, unless FLUFFY_REQUIRE_JAIL (set by .ci/run)
// demands the jail.
func TestAdapterRunsInsideItsJail(t *testing.T) {
	needDocker(t)
	if _, err := BwrapUsable(); err != nil && os.Getenv(EnvRequireJail) == "" {
		t.Skipf("bubblewrap unusable, the adapter runs unjailed: %v", err)
	}
	rc := tenv.rtClient.ReattachConfig()
	if rc == nil || rc.Pid <= 0 {
		t.Fatalf("no pid for the adapter's process: %+v", rc)
	}
	pid, err := adapterPid(rc.Pid, "runtime-docker")
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts"} {
		mine, err1 := os.Readlink("/proc/self/ns/" + ns)
		its, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if err1 != nil || err2 != nil {
			t.Fatalf("read %s namespace: %v %v", ns, err1, err2)
		}
		if mine == its {
			t.Errorf("the adapter (pid %d) shares the test's %s namespace %s: it is not jailed", pid, ns, its)
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil || n != 0 {
				t.Errorf("the adapter has effective capabilities %s", strings.TrimSpace(v))
			}
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/root", pid))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "plugin") {
		t.Errorf("the adapter's root %v lacks /plugin: it is not the jail's", names)
	}
	for _, host := range []string{"etc", "usr", "home", "root", "bin"} {
		if slices.Contains(names, host) {
			t.Errorf("the adapter's root %v shows the host's /%s", names, host)
		}
	}
}

// adapterPid finds, among root and its descendants, the process whose
// argv[0] is named name: the adapter itself, below bwrap's own processes.
func adapterPid(root int, name string) (int, error) {
	children := map[int][]int{}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		pid, err1 := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		ppid, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var seen []string
	for queue := []int{root}; len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		arg0, _, _ := bytes.Cut(cmd, []byte{0})
		if filepath.Base(string(arg0)) == name {
			return pid, nil
		}
		seen = append(seen, fmt.Sprintf("%d:%s", pid, arg0))
		queue = append(queue, children[pid]...)
	}
	return 0, fmt.Errorf("no process named %s below pid %d (saw %v)", name, root, seen)
}

// TestRequiredJailRefusesFallback: with Require (EnvRequireJail), an
// adapter bubblewrap cannot jail is not started at all; without it, the
// documented fallback (a plain subprocess) is what Prepare builds.
func TestRequiredJailRefusesFallback(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no bwrap to be found
	lease, err := AcquireLease(t.TempDir(), NewKernelID())
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	bin := filepath.Join(t.TempDir(), "runtime-docker")
	writeFile(t, bin, "#!/bin/sh\n")
	spec := LaunchSpec{Name: "runtime-docker", Kind: "runtime", InstanceID: "adapter", Binary: bin, Verified: true, EntryName: "runtime-docker"}

	cfg := &plugin.ClientConfig{}
	_, err = (&AdapterJail{Lease: lease, EngineSocket: sock, Require: true}).Prepare(context.Background(), spec, cfg)
	if !uerr.HasCode(err, CodeJailRequired) || cfg.Cmd != nil {
		t.Fatalf("required jail without bubblewrap: err %v, command %v", err, cfg.Cmd)
	}
	if e := uerr.From(err); !strings.Contains(e.Why, "bubblewrap is not installed") || !strings.Contains(e.Fix, "apt install bubblewrap") {
		t.Fatalf("error does not say why and how to fix: %+v", e)
	}

	cfg = &plugin.ClientConfig{}
	j := &AdapterJail{Lease: lease, EngineSocket: sock}
	ld, err := j.Prepare(context.Background(), spec, cfg)
	if err != nil || cfg.Cmd == nil || cfg.Cmd.Path != bin {
		t.Fatalf("fallback without Require: err %v, command %v", err, cfg.Cmd)
	}
	ld.Cleanup()
	if jailed, why := j.Jailed(); jailed || why == nil {
		t.Fatalf("Jailed() = %v, %v after the fallback", jailed, why)
	}
}
