package conformance

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// sandboxFacts checks every statement CORE-SANDBOX-001 makes about the
// container the plugin runs in, twice: by the engine's view of the
// container (its record, read through the suite's engine view, see
// engineView) and, when the
// container's process is visible from here, by the plugin process itself
// (/proc/<pid>: its uids, capability sets, no_new_privs, the root mount and
// the network devices of its namespace). It returns what it verified and
// the statements that do not hold; err when it could not look at all.
func sandboxFacts(ctx context.Context, engine rt.Client, containerID, wantTemplate string) (seen, problems []string, err error) {
	j, found, err := engine.Inspect(ctx, containerID)
	if err != nil {
		return nil, nil, fmt.Errorf("inspect container %s: %w", containerID, err)
	}
	if !found {
		return nil, nil, fmt.Errorf("inspect container %s: the engine does not know it", containerID)
	}
	hc := j.Config
	if got := j.Labels[sandbox.LabelTemplate]; got != wantTemplate {
		problems = append(problems, fmt.Sprintf("runs in template %q, the manifest declares %q", got, wantTemplate))
	}
	if !hc.ReadOnlyRootfs {
		problems = append(problems, "the engine reports a writable root filesystem")
	}
	uid, _, _ := strings.Cut(hc.User, ":")
	if uid == "" || uid == "0" || uid == "root" {
		problems = append(problems, fmt.Sprintf("the engine runs it as user %q (root)", hc.User))
	}
	if hc.NetworkMode != "none" {
		problems = append(problems, fmt.Sprintf("network mode %q, not none", hc.NetworkMode))
	}
	dropAll := false
	for _, c := range hc.CapDrop {
		dropAll = dropAll || strings.EqualFold(c, "ALL")
	}
	if !dropAll || len(hc.CapAdd) > 0 {
		problems = append(problems, fmt.Sprintf("capabilities: drop %v, add %v (want drop ALL, add none)", hc.CapDrop, hc.CapAdd))
	}
	seen = append(seen, fmt.Sprintf("engine: template %s, read-only root, user %s, network none, cap drop ALL", wantTemplate, hc.User))
	if j.Pid <= 0 {
		return seen, append(problems, "the container's process is not running"), nil
	}
	pid := j.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		// A remote engine: its processes are not ours to see.
		return append(seen, "process: not visible from here (remote engine), engine view only"), problems, nil
	}
	mountinfo, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	netdev, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/dev", pid))
	s, p := processFacts(string(status), string(mountinfo), string(netdev))
	return append(seen, s), append(problems, p...), nil
}

// processFacts judges a sandboxed process from its /proc files: every uid
// non-zero, no capability in any set, no_new_privs, "/" mounted read-only
// and no network device but loopback.
func processFacts(status, mountinfo, netdev string) (seen string, problems []string) {
	fields := map[string]string{}
	for _, l := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	uids := strings.Fields(fields["Uid"])
	if len(uids) == 0 {
		problems = append(problems, "process: no Uid line in /proc status")
	}
	for _, u := range uids {
		if u == "0" {
			problems = append(problems, "process: runs with uid 0 (Uid: "+fields["Uid"]+")")
			break
		}
	}
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		v, ok := fields[set]
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(v, 16, 64); err != nil || n != 0 {
			problems = append(problems, fmt.Sprintf("process: %s is %s, want no capabilities", set, v))
		}
	}
	if fields["NoNewPrivs"] != "1" {
		problems = append(problems, "process: no_new_privs is not set")
	}
	rootRO, rootSeen := false, false
	for _, l := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[4] != "/" {
			continue
		}
		rootSeen = true
		rootRO = false
		for _, o := range strings.Split(f[5], ",") {
			if o == "ro" {
				rootRO = true
			}
		}
	}
	switch {
	case !rootSeen:
		problems = append(problems, "process: its root mount is not in /proc mountinfo")
	case !rootRO:
		problems = append(problems, "process: its root filesystem is mounted read-write")
	}
	var ifaces []string
	for _, l := range strings.Split(netdev, "\n") {
		name, _, ok := strings.Cut(l, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.Contains(name, "|") {
			continue
		}
		ifaces = append(ifaces, name)
		if name != "lo" {
			problems = append(problems, "process: has network device "+name)
		}
	}
	uid := "?"
	if len(uids) > 1 {
		uid = uids[1]
	}
	return fmt.Sprintf("process: uid %s, capabilities none, no_new_privs, root read-only, network devices %v", uid, ifaces), problems
}
