package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// cgroupDir is the sandbox's own cgroup as the container sees it: on
// cgroup v2 memory.events counts the processes the memory limit killed, on
// v1 memory/memory.oom_control does.
const cgroupDir = "/sys/fs/cgroup"

// oomKills reads the oom_kill counter of the cgroup at dir; ok is false
// where there is none to read (an old kernel, a runtime that hides it).
func oomKills(dir string) (n int64, ok bool) {
	f, err := os.Open(dir + "/memory.events")
	if err != nil {
		if f, err = os.Open(dir + "/memory/memory.oom_control"); err != nil {
			return 0, false
		}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, found := strings.Cut(sc.Text(), " "); found && k == "oom_kill" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// memoryLimit is the cgroup's memory limit as people read it ("" when
// unknown).
func memoryLimit(dir string) string {
	b, err := os.ReadFile(dir + "/memory.max")
	if err != nil {
		if b, err = os.ReadFile(dir + "/memory/memory.limit_in_bytes"); err != nil {
			return ""
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// markOOM turns a run during which the memory limit killed a process
// into a runner_error that says so. A test binary killed that way looks
// like a failing test (started, never finished), but it says nothing
// about the code: counted red, it would open source writing in strict
// mode on a failure no assertion made.
func markOOM(run *testrun.Run, before, after int64, limit string) {
	if after <= before || run.Status == testrun.Timeout {
		return
	}
	lim := "its limit"
	if limit != "" {
		lim = limit
	}
	run.Status = testrun.RunnerError
	run.Summary = strings.TrimSpace(fmt.Sprintf("the sandbox's memory limit (%s) killed a test process (out of memory): the run says nothing about whether the code works; make the tests use less memory, or run fewer packages at once (path)", lim) + "\n" + run.Summary)
}
