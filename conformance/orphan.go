package conformance

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/fluffy-waffle/fluffy/plugins/base"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
)

// orphanCheck starts the plugin from a throwaway kernel process, SIGKILLs
// that process, and watches the plugin: it must exit within 5 s.
func orphanCheck(ctx context.Context, p *probe) outcome {
	if p.r.opts.Contained {
		return containedOrphanCheck(ctx, p)
	}
	argv := append(append([]string{}, p.r.opts.StubKernel...), p.m.EntryPath(), p.m.Kind, p.m.SHA256, p.ws)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fail("stub kernel: %v", err)
	}
	if err := cmd.Start(); err != nil {
		return skip("cannot run the stub kernel %v: %v", p.r.opts.StubKernel, err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pidc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "PLUGIN_PID "); ok {
				pidc <- rest
				return
			}
			if rest, ok := strings.CutPrefix(sc.Text(), "ERROR "); ok {
				pidc <- "error: " + rest
				return
			}
		}
		close(pidc)
	}()
	var line string
	select {
	case line = <-pidc:
	case <-time.After(p.r.opts.StartTimeout + 5*time.Second):
		return fail("the stub kernel did not report the plugin's pid in time")
	case <-ctx.Done():
		return fail("timed out")
	}
	pid, err := strconv.Atoi(line)
	if err != nil {
		return fail("the stub kernel could not start the plugin: %s", line)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	t0 := time.Now()
	for time.Since(t0) < 5*time.Second {
		if !processAlive(pid) {
			return pass("exited %s after its kernel was killed", time.Since(t0).Round(time.Millisecond))
		}
		time.Sleep(25 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	return fail("the plugin (pid %d) was still running 5 s after its kernel was SIGKILLed; it would leak\nfix: serve with pluginsdk.Serve* from this fluffy release (it exits when the kernel's connection closes)", pid)
}

// containedOrphanCheck is CORE-SHUTDOWN-002 for a plugin that may run only
// in its sandbox: the suite starts it in its L2 container and then does
// what a SIGKILLed kernel's death does to it — every connection from the
// kernel closes, without a Shutdown request — and watches the container:
// its process must exit within 5 s.
func containedOrphanCheck(ctx context.Context, p *probe) outcome {
	c, _, err := p.rawStart(ctx, p.launcher(), base.SupportedAPIVersions(), nil)
	if err != nil {
		return fail("could not launch: %v", err)
	}
	launched := p.lastRaw
	defer c.Kill()
	rpc, err := c.Client()
	if err != nil {
		return fail("start: %v", err)
	}
	if _, err := rpc.Dispense(p.m.Kind); err != nil {
		return fail("dispense: %v", err)
	}
	gc, ok := rpc.(*plugin.GRPCClient)
	if !ok || gc.Conn == nil {
		return fail("the plugin does not speak gRPC (%T)", rpc)
	}
	if launched.Status == nil {
		return skip("the sandbox launcher does not report its container's state, so the plugin's exit could not be watched")
	}
	_ = gc.Conn.Close()
	t0 := time.Now()
	for time.Since(t0) < 5*time.Second {
		if st := launched.Status(); st.Exited {
			return pass("in its container, exited %s after its kernel's connection closed (exit code %d)", time.Since(t0).Round(time.Millisecond), st.ExitCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fail("in its container, the plugin was still running 5 s after its kernel's connection closed; it would leak\nfix: serve with pluginsdk.Serve* from this fluffy release (it exits when the kernel's connection closes)")
}

// processAlive reports whether pid runs (a zombie counts as exited).
func processAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// stubKernelEnv is the environment a stub kernel gives the plugin: what
// the L2 launchers give (including the exit-when-orphaned switch), so the
// plugin sees a real kernel launch.
func stubKernelEnv(workspace string) []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "FLUFFY_WORKSPACE=" + workspace, rt.EnvExitWhenOrphaned + "=1"}
}

// StubKernelMain is the body of the throwaway kernel used by
// CORE-SHUTDOWN-002. args are: plugin binary, kind, sha256, workspace. It
// starts the plugin as the kernel would, prints "PLUGIN_PID <pid>" on
// stdout and then blocks until it is killed. `fluffy conformance
// stub-kernel` and conformance/cmd/stubkernel call it.
//
// With the single argument "idle" it is instead the process the runtime
// profile runs inside its test containers (see IdleMain).
func StubKernelMain(args []string, stdout io.Writer) error {
	if len(args) == 1 && args[0] == idleArg {
		return IdleMain(stdout, nil)
	}
	if len(args) != 4 {
		return fmt.Errorf("usage: stub-kernel BINARY KIND SHA256 WORKSPACE")
	}
	bin, kind, sumHex, ws := args[0], args[1], args[2], args[3]
	sets := kindSets(kind, base.SupportedAPIVersions())
	if sets == nil {
		fmt.Fprintf(stdout, "ERROR no shim for kind %s\n", kind)
		return fmt.Errorf("no shim for kind %s", kind)
	}
	sum, _ := hex.DecodeString(sumHex)
	c := exec.Command(bin)
	c.Dir = ws
	c.Env = stubKernelEnv(ws)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  base.Handshake(),
		VersionedPlugins: sets,
		Cmd:              c,
		SkipHostEnv:      true,
		SecureConfig:     &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     10 * time.Second,
		Logger:           hclog.NewNullLogger(),
	})
	rpc, err := client.Client()
	if err != nil {
		fmt.Fprintf(stdout, "ERROR %s\n", firstLine(err.Error()))
		return err
	}
	if _, err := rpc.Dispense(kind); err != nil {
		fmt.Fprintf(stdout, "ERROR %s\n", firstLine(err.Error()))
		return err
	}
	fmt.Fprintf(stdout, "PLUGIN_PID %d\n", client.ReattachConfig().Pid)
	for {
		time.Sleep(time.Hour)
	}
}
