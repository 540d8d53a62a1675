package conformance

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// idleArg makes StubKernelMain run IdleMain.
const idleArg = "idle"

// idlePrefix starts the one line IdleMain prints.
const idlePrefix = "FLUFFY-IDLE "

// IdleMain is the process the runtime profile runs in its test containers
// (the stub kernel binary, bind-mounted and started with "idle"). It prints
// what the kernel really enforces on it, as seen from inside:
//
//	FLUFFY-IDLE memory=<cgroup memory limit> pids=<cgroup pids limit> ifaces=<interface names>
//
// then blocks until SIGTERM or SIGINT (so a Stop is quick even as PID 1),
// or until stop is closed (tests).
func IdleMain(stdout io.Writer, stop <-chan struct{}) error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	var names []string
	ifs, err := net.Interfaces()
	if err != nil {
		names = append(names, "error:"+strings.ReplaceAll(err.Error(), " ", "_"))
	}
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	fmt.Fprintf(stdout, "%smemory=%s pids=%s ifaces=%s\n", idlePrefix,
		firstReadable("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
		firstReadable("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"),
		strings.Join(names, ","))
	select {
	case <-sig:
	case <-stop:
	}
	return nil
}

// firstReadable returns the trimmed content of the first file that can be
// read, or "unknown".
func firstReadable(paths ...string) string {
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return "unknown"
}

// parseIdle parses IdleMain's line out of a container's output.
func parseIdle(out string) (map[string]string, bool) {
	for _, l := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), idlePrefix)
		if !ok {
			continue
		}
		m := map[string]string{}
		for _, f := range strings.Fields(rest) {
			k, v, _ := strings.Cut(f, "=")
			m[k] = v
		}
		return m, true
	}
	return nil, false
}
