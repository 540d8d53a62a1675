package fault

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/test/harness"
)

// projectFS is the size of the tmpfs the disk fault's project lives on:
// the kernel's start-time check wants 256 MiB free beside the database.
const projectFS = "300m"

// mountTmpfs mounts a fresh tmpfs of size on dir for the test's life.
// It needs root; only a run that is neither root nor CI skips.
func mountTmpfs(t *testing.T, size string) func(dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the disk fault mounts a tmpfs and needs root, and CI must run it")
		}
		t.Skip("the disk fault mounts a tmpfs: run it as root")
	}
	return func(dir string) {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
			t.Fatalf("mount a tmpfs on %s: %v\n%s", dir, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
				t.Logf("umount %s: %v %s; detaching it", dir, err, out)
				_ = exec.Command("umount", "-l", dir).Run()
			}
		})
	}
}

// fill writes path until the filesystem has no byte left, as another
// program filling the disk would, and returns how much it wrote.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("fill %s: %v", path, err)
			}
		}
	}
	return n
}

// TestDiskFillsDuringTask: the project (its tree, git and .fluffy) is on a
// small filesystem that another program fills to the last byte while the
// task's first test run is in its sandbox. The kernel must not crash (its
// database writes through memory maps, where a full disk is a SIGBUS): it
// stops writing, the task fails with DISK_FULL saying what to free, the
// project's files are their old content, nothing is left running; once
// space is freed the session resumes, the audit chain verifies and a task
// finishes the change.
func TestDiskFillsDuringTask(t *testing.T) {
	u := newUserOn(t, mountTmpfs(t, projectFS), goodTask())
	start := time.Now() // after the wait for a parallel slot
	tk := u.start("make Count ignore case")
	tk.waitEvent(t, 3*time.Minute, "test.run executing", executing("test.run"))
	filler := filepath.Join(u.dir, ".fill")
	n := fill(t, filler)
	t.Logf("filled the project's filesystem with %d MiB at the first test run", n>>20)
	tk.wait(t, time.Minute)
	if crash := u.kernelCrash(); crash != "" {
		t.Fatalf("the kernel crashed on the full disk:\n%s", crash)
	}
	code, reason := told(t, tk, "DISK_FULL")
	t.Logf("told %s: %s\nstderr:\n%s", code, reason, tk.stderr.String())
	if !strings.Contains(tk.stderr.String()+tk.stdout.String(), "free") {
		t.Fatalf("the DISK_FULL error does not say to free space:\n%s", tk.stderr.String())
	}
	// Still full: the project's files are whole and old.
	files := map[string][]string{"wordfreq.go": {wordfreq}, "case_test.go": {""}}
	for path, allowed := range files {
		got, err := os.ReadFile(filepath.Join(u.dir, path))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if string(got) != allowed[0] {
			t.Fatalf("%s changed while the disk was full (%d bytes)", path, len(got))
		}
	}
	// The kernel that stopped writing has gone, and with it its containers.
	waitFor(t, 30*time.Second, "the kernel that hit the full disk to exit", func() bool {
		_, err := os.Stat(filepath.Join(u.home, "k", sha256Hex(filepath.Clean(u.dir))[:16]+".sock"))
		return os.IsNotExist(err)
	})
	u.noContainers()
	for _, l := range strings.Split(u.kernelLog(), "\n") {
		if strings.Contains(l, "full disk") || strings.Contains(l, "DISK_FULL") {
			t.Logf("kernel: %.300s", l)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s := u.recovered(files)
	t.Logf("after the full disk: %+v", s)
	u.finishes()
	t.Logf("the disk fault took %v", time.Since(start).Round(time.Second))
}

// kernelCrash is the Go runtime's crash report in the project's kernel log
// (its first lines and the faulting goroutine), "" when there is none.
func (u *user) kernelCrash() string {
	b, _ := os.ReadFile(filepath.Join(u.home, "k", sha256Hex(filepath.Clean(u.dir))[:16]+".log"))
	log := string(b)
	for _, mark := range []string{"unexpected fault address", "fatal error", "SIGBUS"} {
		if i := strings.Index(log, mark); i >= 0 {
			return harness.Tail(log[:i], 300) + log[i:min(len(log), i+2500)]
		}
	}
	return ""
}
