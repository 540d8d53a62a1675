package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	rt "github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	vcspb "github.com/fluffy-waffle/fluffy/plugins/vcs/proto"
)

// apparentSize sums the sizes of the regular files under dir (the test's
// own measure, independent of the watcher's).
func apparentSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// quotaExit waits for the sandbox to have ended and returns how.
func quotaExit(t *testing.T, r *running) (Status, error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := r.launched.Status()
		if st.Exited || time.Now().After(deadline) {
			return st, st.ExitError(r.spec.Name, r.spec.Limits)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDiskQuotaStopsTheSandbox: a plugin writing 4 GiB into /out, or into
// its socket directory where that is a watched bind mount (a container
// whose socket tmpfs the kernel cannot reach), is stopped past its limit
// with SANDBOX_QUOTA_EXCEEDED, well before its write ends, and what it
// wrote to /out is discarded.
func TestDiskQuotaStopsTheSandbox(t *testing.T) {
	needDocker(t)
	const outLimit = 64 << 20
	for _, tc := range []struct {
		name, path string
		bytes      int64
		what       string
	}{
		// The writer fills the page cache at several GiB/s; the watcher
		// (every 20 ms near the limit) and the engine's kill stop it
		// hundreds of MiB past the limit on an idle machine (108-754 MiB
		// seen). What is checked: it is stopped well short of its 4 GiB,
		// the call fails with the quota error, the output is deleted.
		{"out 4GiB", GuestOut + "/op1/big", 4 << 30, GuestOut},
		{"socket dir 4GiB", GuestSocketDir + "/junk", 4 << 30, GuestSocketDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := newSpec(t, "code-executor")
			spec.Limits.OutBytes = outLimit
			cs := tenv.containers
			if tc.what == GuestSocketDir {
				cs = bindSockContainers(t)
			}
			r := launch(t, cs, spec)
			if _, err := OperationDir(spec.OutDir, "op1"); err != nil {
				t.Fatal(err)
			}
			watched := spec.OutDir
			if tc.what == GuestSocketDir {
				watched = filepath.Join(tenv.lease.Dir, "sock")
			}
			var peak atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if n := apparentSize(watched); n > peak.Load() {
						peak.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
			}()
			start := time.Now()
			out, err := call(t, r, "fill", map[string]any{"path": tc.path, "bytes": tc.bytes}, 2*time.Minute)
			took := time.Since(start)
			st, xerr := quotaExit(t, r)
			close(stop)
			wg.Wait()
			t.Logf("call took %s, peak %d MiB in the watched dir, call: %+v %v", took.Round(time.Millisecond), peak.Load()>>20, out, err)
			if err == nil && out.OK {
				t.Fatalf("the plugin wrote %d MiB to %s unhindered", out.Count, tc.path)
			}
			if !uerr.HasCode(xerr, CodeQuotaExceeded) {
				t.Fatalf("sandbox ended with %v (status %+v), want %s", xerr, st, CodeQuotaExceeded)
			}
			if ue, _ := uerr.As(xerr); !strings.Contains(ue.Why, tc.what) {
				t.Fatalf("error does not name %s: %v", tc.what, ue)
			}
			if p := peak.Load(); p > tc.bytes/2 {
				t.Fatalf("the directory grew to %d MiB of the %d MiB written: the writer was not stopped in time", p>>20, tc.bytes>>20)
			}
			if tc.what == GuestOut {
				deadline := time.Now().Add(10 * time.Second)
				for apparentSize(spec.OutDir) > 0 && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if n := apparentSize(spec.OutDir); n > 0 {
					t.Fatalf("%d bytes of the over-quota output were kept", n)
				}
			}
		})
	}
}

// TestOutQuotaIsTheFilesystems: /out is a filesystem of the template's
// size. A plugin writing into it as fast as it can gets ENOSPC in the
// sandbox at the limit, the call fails with SANDBOX_QUOTA_EXCEEDED, and
// the host output directory never holds more than the limit (sampled
// every few ms during the call and after it); an output under the limit
// reaches the host intact. A kind whose /out nothing reads (a provider)
// gets the same ENOSPC and nothing on the host at all.
func TestOutQuotaIsTheFilesystems(t *testing.T) {
	needDocker(t)
	for _, tc := range outQuotaCases {
		t.Run(tc.name, func(t *testing.T) { checkOutQuota(t, tenv.containers, tc) })
	}
}

// TestBwrapOutQuotaIsTheFilesystems is TestOutQuotaIsTheFilesystems for
// the bwrap launcher: /out is a tmpfs of its limit in the jail (bubblewrap
// --size), copied to the host by the kernel after each call, so a writer
// as fast as the page cache gets ENOSPC inside and the host output
// directory never holds more than the limit (it was a watched bind mount
// that a fast writer overran before the watcher stopped it).
func TestBwrapOutQuotaIsTheFilesystems(t *testing.T) {
	bw, err := BwrapUsable()
	if err != nil {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("bubblewrap unusable in CI: %v", err)
		}
		t.Skipf("bubblewrap unusable: %v", err)
	}
	if !bwrapSizedTmpfs(bw) {
		t.Fatalf("bubblewrap at %s cannot size a tmpfs (--size needs bubblewrap 0.7)", bw)
	}
	for _, tc := range outQuotaCases {
		t.Run(tc.name, func(t *testing.T) { checkOutQuota(t, &Bwrap{Lease: tenv.lease}, tc) })
	}
}

type outQuotaCase struct {
	name, kind string
	bytes      int64
	over       bool
}

const outQuotaLimit = 16 << 20

var outQuotaCases = []outQuotaCase{
	{"tool 1GiB into 16MiB", "tool", 1 << 30, true},
	{"tool 4MiB into 16MiB", "tool", 4 << 20, false},
	{"provider 1GiB into 16MiB", "provider", 1 << 30, true},
}

// checkOutQuota has a plugin of tc.kind write tc.bytes into /out as fast
// as it can while the test measures the host output directory.
func checkOutQuota(t *testing.T, l launcher, tc outQuotaCase) {
	const limit = outQuotaLimit
	spec := newSpec(t, "code-executor")
	spec.Kind = tc.kind
	spec.Limits.OutBytes = limit
	r := launch(t, l, spec)
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if n := apparentSize(spec.OutDir); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	out, err := call(t, r, "fill", map[string]any{"path": GuestOut + "/op1/big", "bytes": tc.bytes}, 2*time.Minute)
	after := apparentSize(spec.OutDir)
	close(stop)
	wg.Wait()
	t.Logf("call: %+v %v; host peak %d bytes, after %d", out, err, peak.Load(), after)
	if p := peak.Load(); p > limit {
		t.Fatalf("the host output directory reached %d bytes, more than the %d limit", p, limit)
	}
	if !tc.over {
		if err != nil || !out.OK {
			t.Fatalf("a write under the limit failed: %+v %v", out, err)
		}
		if after != tc.bytes {
			t.Fatalf("the host has %d bytes of the %d written", after, tc.bytes)
		}
		return
	}
	if out.OK || !strings.Contains(out.Error, "no space left on device") {
		t.Fatalf("the write past the limit did not fail with ENOSPC inside the sandbox: %+v", out)
	}
	if int64(out.Count)<<20 > limit {
		t.Fatalf("the plugin wrote %d MiB into a %d MiB /out", out.Count, limit>>20)
	}
	if tc.kind == "provider" {
		if err != nil || after != 0 || r.launched.Collect != nil {
			t.Fatalf("a private /out: call error %v, %d bytes on the host, collected %v", err, after, r.launched.Collect != nil)
		}
		return
	}
	if !uerr.HasCode(err, CodeQuotaExceeded) {
		t.Fatalf("call error = %v, want %s", err, CodeQuotaExceeded)
	}
	if ue, _ := uerr.As(err); !strings.Contains(ue.Why, GuestOut) {
		t.Fatalf("error does not name %s: %v", GuestOut, ue)
	}
	if after != 0 {
		t.Fatalf("%d bytes of the over-quota output were kept", after)
	}
	if st, xerr := quotaExit(t, r); !uerr.HasCode(xerr, CodeQuotaExceeded) {
		t.Fatalf("sandbox ended with %v (status %+v), want %s", xerr, st, CodeQuotaExceeded)
	}
}

// TestSanitizeOutLeavesOnlyRegularFiles: after a call, the output directory
// holds only regular files and directories with normalised modes, owned by
// the kernel's user; a link to a host file is removed, never followed.
func TestSanitizeOutLeavesOnlyRegularFiles(t *testing.T) {
	needDocker(t)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := newSpec(t, "code-executor")
	r := launch(t, tenv.containers, spec)
	op, err := OperationDir(spec.OutDir, "op1")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, r, "litter", map[string]any{"path": secret}); !got.OK {
		t.Fatalf("litter: %+v", got)
	}
	removed, err := SanitizeOut(spec.OutDir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{"op1/esc\x1b[2Jname", "op1/fifo", "op1/hostlink", "op1/new\nline"}
	if r.launched.Collect != nil {
		// /out is copied to the host: the FIFO and the link never reach it.
		want = []string{"op1/esc\x1b[2Jname", "op1/new\nline"}
	}
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %q, want %q", removed, want)
	}
	fi, err := os.Stat(secret)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the host file behind the link was changed: %v %v", fi.Mode(), err)
	}
	uid := os.Getuid()
	_, gid := GuestIdentity()
	var left []string
	err = filepath.WalkDir(op, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(op, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s owned by %d:%d, want %d:%d", rel, st.Uid, st.Gid, uid, gid)
		}
		switch {
		case fi.IsDir():
			if fi.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSetuid|fs.ModeSticky) != fs.ModeSetgid|0o770 {
				t.Errorf("%s: directory mode %v", rel, fi.Mode())
			}
		case fi.Mode().IsRegular():
			m := fi.Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSetuid | fs.ModeSticky)
			if m != 0o660 && m != 0o770 {
				t.Errorf("%s: file mode %v", rel, fi.Mode())
			}
		default:
			t.Errorf("%s: %v survived", rel, fi.Mode().Type())
		}
		left = append(left, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	wantLeft := []string{".", "keep", "keep/result.txt", "locked", "private", "private/deep", "private/deep/f", "suid"}
	if !slices.Equal(left, wantLeft) {
		t.Fatalf("left %q, want %q", left, wantLeft)
	}
	if b, err := os.ReadFile(filepath.Join(op, "locked")); err != nil || string(b) != "x" {
		t.Fatalf("a 0000 file is not readable after normalising: %q %v", b, err)
	}
	if err := os.RemoveAll(spec.OutDir); err != nil {
		t.Fatalf("the user cannot delete the output: %v", err)
	}
}

// TestKernelDirsRefuseSymlinks: a link planted where the kernel creates the
// output directory or an operation directory is refused, and what it
// points at is left alone.
func TestKernelDirsRefuseSymlinks(t *testing.T) {
	needDocker(t)
	target := t.TempDir()
	if err := os.Chmod(target, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := newSpec(t, "code-executor")
	if err := os.Symlink(target, spec.OutDir); err != nil {
		t.Fatal(err)
	}
	_, err := launchErr(tenv.containers, spec)
	if !uerr.HasCode(err, confine.CodeSymlink) {
		t.Fatalf("launch with a linked output dir: %v, want %s", err, confine.CodeSymlink)
	}
	if fi, _ := os.Stat(target); fi.Mode() != fs.ModeDir|0o755 {
		t.Fatalf("the link's target was changed to %v", fi.Mode())
	}

	out := t.TempDir()
	if err := os.Symlink(target, filepath.Join(out, "op1")); err != nil {
		t.Fatal(err)
	}
	if _, err := OperationDir(out, "op1"); !uerr.HasCode(err, confine.CodeSymlink) {
		t.Fatalf("OperationDir over a link: %v", err)
	}
	if fi, _ := os.Stat(target); fi.Mode() != fs.ModeDir|0o755 {
		t.Fatalf("the link's target was changed to %v", fi.Mode())
	}
}

const envHelperNonRoot = "FLUFFY_SANDBOX_TEST_NONROOT"

// helperNonRoot is a kernel running as a non-root user: it launches the
// hostile plugin on PROJECT (a 0700 directory of that user's) and prints
// what the plugin could do, one JSON line per call.
func helperNonRoot() {
	var undo []func()
	fail := func(err error) {
		fmt.Println("ERR", err)
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		os.Exit(1)
	}
	lease, err := AcquireLease(os.Getenv("RUN_DIR"), os.Getenv(envHelperNonRoot))
	if err != nil {
		fail(err)
	}
	undo = append(undo, func() { lease.Release() })
	defer lease.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Warn})
	pc, c, err := LaunchAdapter(ctx, &AdapterJail{Lease: lease, Logger: logger, Require: os.Getenv(EnvRequireJail) != ""}, os.Getenv("ADAPTER_BIN"), logger)
	if err != nil {
		fail(err)
	}
	undo = append(undo, pc.Kill)
	defer pc.Kill()
	cs, err := NewContainers(ctx, ContainersConfig{Runtime: c, Lease: lease})
	if err != nil {
		fail(err)
	}
	spec := LaunchSpec{Name: "hostile", Kind: "tool", Binary: os.Getenv("HOSTILE_BIN"), Template: "code-executor",
		Workspace: os.Getenv("PROJECT"), OutDir: os.Getenv("OUT"), SessionID: "s-nonroot", InstanceID: "nonroot"}
	r, err := launchErr(cs, spec)
	if err != nil {
		fail(err)
	}
	undo = append(undo, r.stop)
	defer r.stop()
	// A non-root kernel reaches its container's socket tmpfs through
	// /proc/PID/root (the container runs as its uid).
	if cs.sockBind.Load() {
		fail(errors.New("a non-root kernel could not reach its container's socket tmpfs; it fell back to a watched bind mount"))
	}
	if _, err := OperationDir(spec.OutDir, "op1"); err != nil {
		fail(err)
	}
	for _, c := range []struct {
		tool string
		args string
	}{
		{"whoami", `{}`},
		{"read_file", `{"path":"/workspace/sub/notes.txt"}`},
		{"litter", `{"path":"/etc/passwd"}`},
	} {
		res, err := r.tool.Execute(ctx, tool.Call{ID: c.tool, Tool: c.tool, Args: json.RawMessage(c.args), OperationID: "op1"}, nil)
		if err != nil {
			fail(err)
		}
		fmt.Printf("RESULT %s %s\n", c.tool, res.Output)
	}
	if _, err := SanitizeOut(spec.OutDir); err != nil {
		fail(err)
	}
	fmt.Println("DONE")
}

// TestNonRootKernelReadsA0700Project: a kernel run by a
// non-root user starts plugins that can read that user's 0700 project (a
// `mktemp -d` directory with 0600 files), and everything they write is the
// user's to delete. As root, the test runs its helper kernel as another
// uid; as a non-root user, as itself.
func TestNonRootKernelReadsA0700Project(t *testing.T) {
	needDocker(t)
	uid, gid := os.Getuid(), os.Getgid()
	asOther := uid == 0
	if asOther {
		uid, gid = 4242, 4242
	}
	base, err := os.MkdirTemp("", "nr") // short: unix socket paths live below it
	if err != nil {
		t.Fatal(err)
	}
	project, out, run := filepath.Join(base, "project"), filepath.Join(base, "session", "out"), filepath.Join(base, "run")
	for _, d := range []string{filepath.Join(project, "sub"), filepath.Dir(out), run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.WriteFile(filepath.Join(project, "sub", "notes.txt"), []byte("the user's notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{project, filepath.Join(project, "sub")} {
		if err := os.Chmod(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary, where the helper kernel runs from, readable by uid.
	self := filepath.Join(base, "sandbox.test")
	copyFile(t, os.Args[0], self)
	kid := NewKernelID()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = []string{envHelperNonRoot + "=" + kid, "RUN_DIR=" + run, "HOSTILE_BIN=" + tenv.hostile, "ADAPTER_BIN=" + tenv.adapter,
		"PROJECT=" + project, "OUT=" + out, "HOME=" + base, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + base}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	if asOther {
		if err := filepath.WalkDir(base, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		groups := []uint32{}
		var st syscall.Stat_t
		if syscall.Stat("/var/run/docker.sock", &st) == nil {
			groups = append(groups, st.Gid)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
	}
	b, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		left, _ := tenv.rt.List(context.Background(), map[string]string{LabelKernel: kid}, true)
		for _, c := range left {
			t.Errorf("the helper kernel left container %s", c.Name)
			_ = tenv.rt.Remove(context.Background(), c.ID, true, true)
		}
	})
	got := map[string]attemptOut{}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			name, js, _ := strings.Cut(rest, " ")
			var a attemptOut
			_ = json.Unmarshal([]byte(js), &a)
			got[name] = a
		}
	}
	if err != nil || !strings.Contains(string(b), "DONE") {
		t.Fatalf("helper kernel as uid %d: %v\n%s", uid, err, b)
	}
	if w := got["whoami"].Data; !strings.HasPrefix(w, fmt.Sprintf("uid=%d gid=%d ", uid, gid)) {
		t.Errorf("the plugin of uid %d's kernel runs as %q", uid, w)
	}
	if r := got["read_file"]; !r.OK || r.Data != "the user's notes" {
		t.Errorf("reading the user's 0600 file in a 0700 project: %+v", r)
	}
	// Everything the plugin left is the user's: normalised and deletable.
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("%s is owned by uid %d, not the user %d", p, st.Uid, uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkQuotaMeasure is one quota measurement of an output directory
// holding 1000 files in 10 directories (the watcher does one per sandbox
// every 100 ms).
func BenchmarkQuotaMeasure(b *testing.B) {
	dir := b.TempDir()
	for i := range 1000 {
		d := filepath.Join(dir, fmt.Sprint("d", i%10))
		_ = os.MkdirAll(d, 0o755)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint("f", i)), []byte("some output\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, n, err := dirUsage(dir, quotaMaxEntries); err != nil || n != 1010 {
			b.Fatal(n, err)
		}
	}
}

// TestBwrapDiskQuotaStopsTheSandbox: a bwrap plugin writing 4 GiB into
// /out (a tmpfs of its limit: ENOSPC inside, then the copy stops it) or
// its build cache (a host directory, measured by the quota watcher) is
// stopped past the limit (its process group killed) with
// SANDBOX_QUOTA_EXCEEDED, well before its write ends, and what it wrote
// there is discarded. The socket directory: TestBwrapSocketDirIsATmpfs.
func TestBwrapDiskQuotaStopsTheSandbox(t *testing.T) {
	if _, err := BwrapUsable(); err != nil {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("bubblewrap unusable in CI: %v", err)
		}
		t.Skipf("bubblewrap unusable: %v", err)
	}
	const limit = 64 << 20
	for _, tc := range []struct {
		name, what string
	}{
		{"out 4GiB", GuestOut},
		{"cache 4GiB", GuestCache},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const bytes = 4 << 30
			spec := newSpec(t, "code-executor")
			spec.Limits.OutBytes = limit
			spec.BuildCache = filepath.Join(t.TempDir(), "cache")
			r := launch(t, &Bwrap{Lease: tenv.lease, CacheBytes: limit}, spec)
			if _, err := OperationDir(spec.OutDir, "op1"); err != nil {
				t.Fatal(err)
			}
			path, watched := GuestOut+"/op1/big", spec.OutDir
			if tc.what == GuestCache {
				path, watched = GuestCache+"/junk", spec.BuildCache
			}
			var peak atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if n := apparentSize(watched); n > peak.Load() {
						peak.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
			}()
			start := time.Now()
			out, err := call(t, r, "fill", map[string]any{"path": path, "bytes": bytes}, 2*time.Minute)
			took := time.Since(start)
			if err == nil && out.OK {
				close(stop)
				wg.Wait()
				t.Fatalf("the plugin wrote %d MiB to %s unhindered in %s", out.Count, path, took)
			}
			if r.launched.Status == nil {
				t.Fatal("the bwrap launcher reports no status: a quota stop cannot be told")
			}
			st, xerr := quotaExit(t, r)
			close(stop)
			wg.Wait()
			t.Logf("call took %s, peak %d MiB in the watched dir, call: %+v %v", took.Round(time.Millisecond), peak.Load()>>20, out, err)
			if !uerr.HasCode(xerr, CodeQuotaExceeded) {
				t.Fatalf("sandbox ended with %v (status %+v), want %s", xerr, st, CodeQuotaExceeded)
			}
			if ue, _ := uerr.As(xerr); !strings.Contains(ue.Why, tc.what) {
				t.Fatalf("error does not name %s: %v", tc.what, ue)
			}
			if p := peak.Load(); p > bytes/2 {
				t.Fatalf("the directory grew to %d MiB of the %d MiB written: the writer was not stopped in time", p>>20, bytes>>20)
			}
			if n := apparentSize(watched); n > 0 {
				t.Fatalf("%d bytes of the over-quota %s were kept", n, tc.what)
			}
			if _, err := call(t, r, "echo", map[string]any{"text": "alive?"}, 5*time.Second); err == nil {
				t.Fatal("the plugin still answers after its quota kill")
			}
		})
	}
}

// TestBwrapSocketDirIsATmpfs: a bwrap plugin's go-plugin socket
// directory is a tmpfs of 1 MiB in its jail, reached from the host through
// a link to the jail's /proc/PID/root: a plugin writing 300 MiB there as
// fast as it can gets ENOSPC at 1 MiB, the call fails with
// SANDBOX_QUOTA_EXCEEDED, and the host holds nothing of it (it was a
// watched bind mount that took 23-300 MiB before the watcher's stop).
func TestBwrapSocketDirIsATmpfs(t *testing.T) {
	bw, err := BwrapUsable()
	if err != nil {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("bubblewrap unusable in CI: %v", err)
		}
		t.Skipf("bubblewrap unusable: %v", err)
	}
	if !bwrapSizedTmpfs(bw) {
		t.Fatalf("bubblewrap at %s cannot size a tmpfs (--size needs bubblewrap 0.7)", bw)
	}
	spec := newSpec(t, "code-executor")
	r := launch(t, &Bwrap{Lease: tenv.lease}, spec)
	sock := filepath.Join(tenv.lease.Dir, "jail", safeName(spec.Name+"-"+spec.InstanceID))
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the host's socket directory path is %v %v, want a link into the jail", fi, err)
	}
	// What the host's disk holds under the jails' directory (links are
	// not followed: the jail's tmpfs is not the host's disk), beyond what
	// it held before the write (other jails of the test lease).
	base, _, err := dirUsage(filepath.Dir(sock), quotaMaxEntries)
	if err != nil {
		t.Fatal(err)
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if n, _, err := dirUsage(filepath.Dir(sock), quotaMaxEntries); err == nil && n-base > peak.Load() {
				peak.Store(n - base)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	out, err := call(t, r, "fill", map[string]any{"path": sock + "/junk", "bytes": 300 << 20}, 2*time.Minute)
	close(stop)
	wg.Wait()
	t.Logf("call: %+v %v; host peak %d bytes", out, err, peak.Load())
	if out.OK || !strings.Contains(out.Error, "no space left on device") {
		t.Fatalf("the write past 1 MiB did not fail with ENOSPC inside the jail: %+v %v", out, err)
	}
	if out.Count > 1 {
		t.Fatalf("the plugin wrote %d MiB into its 1 MiB socket directory", out.Count)
	}
	if !uerr.HasCode(err, CodeQuotaExceeded) {
		t.Fatalf("call error = %v, want %s", err, CodeQuotaExceeded)
	}
	if ue, _ := uerr.As(err); !strings.Contains(ue.Why, "socket directory") {
		t.Fatalf("error does not name the socket directory: %v", ue)
	}
	if p := peak.Load(); p > 0 {
		t.Fatalf("the host disk under the jail directory grew by %d bytes while the plugin wrote its socket directory", p)
	}
	if st, xerr := quotaExit(t, r); !uerr.HasCode(xerr, CodeQuotaExceeded) {
		t.Fatalf("sandbox ended with %v (status %+v), want %s", xerr, st, CodeQuotaExceeded)
	}
}

// TestSocketDirIsATmpfs: a Docker sandbox's go-plugin socket directory
// is a tmpfs of 1 MiB in the container, reached by the kernel through
// /proc/PID/root: a plugin writing 300 MiB into it as fast as it can gets
// ENOSPC at 1 MiB, the host's socket directories (sampled every few ms)
// never grow by a byte, and a kind whose outputs the kernel reads fails
// its call with SANDBOX_QUOTA_EXCEEDED. (It was a host bind mount bounded
// by a 20 ms watcher, which such a writer overran by hundreds of MiB.)
func TestSocketDirIsATmpfs(t *testing.T) {
	needDocker(t)
	for _, tc := range []struct {
		kind  string
		quota bool // the call fails with SANDBOX_QUOTA_EXCEEDED
	}{
		{"tool", true},
		{"provider", false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			spec := newSpec(t, "code-executor")
			spec.Kind = tc.kind
			r := launch(t, tenv.containers, spec)
			if st := r.launched.Status(); st.Quota != "" || st.Exited {
				t.Fatalf("status before the write: %+v", st)
			}
			// Every socket directory of the test lease on the host, as
			// du counts it (blocks, not apparent sizes: a sparse or
			// unlinked-while-open file still takes them).
			hostSock := filepath.Join(tenv.lease.Dir, "sock")
			base := diskBlocks(hostSock)
			var peak atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if n := diskBlocks(hostSock) - base; n > peak.Load() {
						peak.Store(n)
					}
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			out, err := call(t, r, "fill", map[string]any{"path": GuestSocketDir + "/junk", "bytes": 300 << 20}, 2*time.Minute)
			close(stop)
			wg.Wait()
			t.Logf("call: %+v %v; host socket directories grew by at most %d bytes", out, err, peak.Load())
			if p := peak.Load(); p > 0 {
				t.Fatalf("the host disk under the socket directories grew by %d bytes while the plugin wrote its socket directory", p)
			}
			if out.OK || !strings.Contains(out.Error, "no space left on device") {
				t.Fatalf("the write past 1 MiB did not fail with ENOSPC inside the container: %+v %v", out, err)
			}
			if out.Count > 1 {
				t.Fatalf("the plugin wrote %d MiB into its 1 MiB socket directory", out.Count)
			}
			if !tc.quota {
				if err != nil {
					t.Fatalf("call error = %v, want the plugin's own ENOSPC only", err)
				}
				return
			}
			if !uerr.HasCode(err, CodeQuotaExceeded) {
				t.Fatalf("call error = %v, want %s", err, CodeQuotaExceeded)
			}
			if ue, _ := uerr.As(err); !strings.Contains(ue.Why, "socket directory") {
				t.Fatalf("error does not name the socket directory: %v", ue)
			}
			if st, xerr := quotaExit(t, r); !uerr.HasCode(xerr, CodeQuotaExceeded) {
				t.Fatalf("sandbox ended with %v (status %+v), want %s", xerr, st, CodeQuotaExceeded)
			}
		})
	}
}

// TestUnreachableSocketTmpfsFallsBackToTheWatcher: an engine whose pids
// are not this machine's (a VM, another pid namespace: here it reports the
// test's own pid) leaves the kernel no way into a container's socket
// tmpfs. The container is replaced before the plugin is dialed by one
// whose socket directory is a watched bind mount (so the plugin still
// works and an overrun still ends in SANDBOX_QUOTA_EXCEEDED), and later
// containers start that way at once.
func TestUnreachableSocketTmpfsFallsBackToTheWatcher(t *testing.T) {
	needDocker(t)
	cs, err := NewContainers(context.Background(), ContainersConfig{Runtime: foreignPids{tenv.rt}, Lease: tenv.lease})
	if err != nil {
		t.Fatal(err)
	}
	for i, write := range []bool{false, true} {
		r := launch(t, cs, newSpec(t, "code-executor"))
		if !cs.sockBind.Load() {
			t.Fatalf("launch %d: socket directories are still tmpfs after one was out of reach", i)
		}
		if out, err := call(t, r, "write_out", map[string]any{"path": "a.txt", "text": "x"}, time.Minute); err != nil || !out.OK {
			t.Fatalf("launch %d: a call through the fallback failed: %+v %v", i, out, err)
		}
		if !write {
			continue
		}
		_, _ = call(t, r, "fill", map[string]any{"path": GuestSocketDir + "/junk", "bytes": 4 << 30}, 2*time.Minute)
		if st, xerr := quotaExit(t, r); !uerr.HasCode(xerr, CodeQuotaExceeded) {
			t.Fatalf("sandbox ended with %v (status %+v), want %s", xerr, st, CodeQuotaExceeded)
		}
	}
}

// foreignPids is the Docker engine as one in another pid namespace looks
// to the kernel: the pid it reports for a container is some other
// process here.
type foreignPids struct{ Runtime }

func (f foreignPids) Inspect(ctx context.Context, id string) (rt.State, bool, error) {
	st, found, err := f.Runtime.Inspect(ctx, id)
	st.Pid = int64(os.Getpid())
	return st, found, err
}

// bindSockContainers is a Docker launcher whose socket directories are
// watched host bind mounts, as after a socket tmpfs was out of reach.
func bindSockContainers(t *testing.T) *Containers {
	t.Helper()
	cs, err := NewContainers(context.Background(), ContainersConfig{Runtime: tenv.rt, Lease: tenv.lease})
	if err != nil {
		t.Fatal(err)
	}
	cs.sockBind.Store(true)
	return cs
}

// diskBlocks is the disk space the files under dir take (st_blocks), as
// du reports it.
func diskBlocks(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && !d.IsDir() {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// TestBwrapTempFilesAreNotInTheSocketDir: under bwrap TMPDIR is the jail's
// /tmp, not its quota-bounded socket directory, so a compiler's temporary
// files (here 8 MiB, over the socket directory's 1 MiB) do not stop it.
func TestBwrapTempFilesAreNotInTheSocketDir(t *testing.T) {
	if _, err := BwrapUsable(); err != nil {
		if os.Getenv("FLUFFY_REQUIRE_DOCKER") != "" {
			t.Fatalf("bubblewrap unusable in CI: %v", err)
		}
		t.Skipf("bubblewrap unusable: %v", err)
	}
	spec := newSpec(t, "code-executor")
	r := launch(t, &Bwrap{Lease: tenv.lease}, spec)
	env := mustCall(t, r, "env", nil)
	tmp := ""
	for _, kv := range strings.Split(env.Data, "\n") {
		if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
			tmp = v
		}
	}
	if tmp != "/tmp" {
		t.Errorf("TMPDIR is %q in the jail, want /tmp", tmp)
	}
	if got := mustCall(t, r, "fill", map[string]any{"path": tmp + "/build-tmp", "bytes": 8 << 20}); !got.OK {
		t.Fatalf("writing 8 MiB to TMPDIR: %+v", got)
	}
	time.Sleep(200 * time.Millisecond) // several watcher rounds
	if got := mustCall(t, r, "echo", map[string]any{"text": "still here"}); got.Data != "still here" {
		t.Fatalf("echo after a temp file: %+v", got)
	}
	if st := r.launched.Status(); st.Exited || st.Quota != "" {
		t.Fatalf("stopped for a temporary file: %+v", st)
	}
}

// BenchmarkCollect is the cost a Docker sandbox's /out copy adds to each
// call: one engine archive of a /out holding one small file (unchanged
// after the first copy, so it is read but not rewritten).
func BenchmarkCollect(b *testing.B) {
	needDocker(b)
	spec := newSpec(b, "code-executor")
	r := launch(b, tenv.containers, spec)
	if got := mustCall(b, r, "write_out", map[string]any{"path": "result.txt", "text": "done"}); !got.OK {
		b.Fatalf("write_out: %+v", got)
	}
	if r.launched.Collect == nil {
		b.Fatal("no Collect: /out is not a tmpfs volume")
	}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		if err := r.launched.Collect(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCollectedUnaryIsTheCommit: the interceptor's method name is the VCS
// service's Commit as generated.
func TestCollectedUnaryIsTheCommit(t *testing.T) {
	if collectedUnary != vcspb.VCS_Commit_FullMethodName {
		t.Fatalf("collectedUnary = %q, the generated Commit is %q", collectedUnary, vcspb.VCS_Commit_FullMethodName)
	}
}
