package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

func TestOOMKillIsNotRed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte("1073741824\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, ok := oomKills(dir)
	if !ok || n != 2 {
		t.Fatalf("oomKills = %d, %v", n, ok)
	}
	if _, ok := oomKills(t.TempDir()); ok {
		t.Fatal("a cgroup without memory.events reads as known")
	}
	v1 := t.TempDir()
	if err := os.MkdirAll(filepath.Join(v1, "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v1, "memory", "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, ok := oomKills(v1); !ok || n != 5 {
		t.Fatalf("cgroup v1: oomKills = %d, %v", n, ok)
	}
	for _, tc := range []struct {
		name          string
		before, after int64
		in, want      testrun.Status
	}{
		{"killed test", 1, 2, testrun.Red, testrun.RunnerError},
		{"no kill", 2, 2, testrun.Red, testrun.Red},
		{"timeout stays timeout", 1, 2, testrun.Timeout, testrun.Timeout},
		{"green with a kill", 0, 1, testrun.Green, testrun.RunnerError},
	} {
		run := testrun.Run{Status: tc.in, Summary: "TestHog started and never finished"}
		markOOM(&run, tc.before, tc.after, memoryLimit(dir))
		if run.Status != tc.want {
			t.Fatalf("%s: status %s, want %s", tc.name, run.Status, tc.want)
		}
		if tc.want == testrun.RunnerError && (!strings.Contains(run.Summary, "memory limit (1024 MiB)") || !strings.Contains(run.Summary, "started and never finished")) {
			t.Fatalf("%s: summary %q", tc.name, run.Summary)
		}
	}
}
