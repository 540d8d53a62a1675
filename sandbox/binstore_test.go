package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
)

func writeFile(t *testing.T, p, content string) string {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := manifests.FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestBinaryStore: the copy that runs is hashed as it is
// written, read-only in a private directory, and never follows a later
// change of the source or of itself.
func TestBinaryStore(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, b *BinaryStore, src, sum string) // after a first good Materialize
		want    string                                              // error code, "" = ok
		content string                                              // the copy's content afterwards
	}{
		{"unchanged source: same copy", func(*testing.T, *BinaryStore, string, string) {}, "", "good"},
		{"source swapped: refused", func(t *testing.T, _ *BinaryStore, src, _ string) { writeFile(t, src, "evil") }, CodeBinaryMismatch, "good"},
		{"source replaced by rename: refused", func(t *testing.T, _ *BinaryStore, src, _ string) {
			tmp := src + ".new"
			writeFile(t, tmp, "evil")
			if err := os.Rename(tmp, src); err != nil {
				t.Fatal(err)
			}
		}, CodeBinaryMismatch, "good"},
		{"copy tampered: repaired from the good source", func(t *testing.T, b *BinaryStore, _, sum string) {
			p := b.Path(sum)
			_ = os.Chmod(p, 0o755)
			writeFile(t, p, "evil")
			_ = os.Chmod(p, 0o555)
		}, "", "good"},
		{"copy tampered and source swapped: refused", func(t *testing.T, b *BinaryStore, src, sum string) {
			p := b.Path(sum)
			_ = os.Chmod(p, 0o755)
			writeFile(t, p, "evil")
			writeFile(t, src, "evil")
		}, CodeBinaryMismatch, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			b, err := OpenBinaryStore(filepath.Join(home, "cas"))
			if err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(t.TempDir(), "plugin")
			sum := writeFile(t, src, "good")
			p, err := b.Materialize("p", src, sum)
			if err != nil {
				t.Fatal(err)
			}
			if p != filepath.Join(home, "cas", "sha256", sum) {
				t.Fatalf("copy at %s", p)
			}
			for _, d := range []string{filepath.Join(home, "cas"), b.Dir()} {
				if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
					t.Fatalf("%s: %v %v, want 0700", d, fi.Mode(), err)
				}
			}
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o555 {
				t.Fatalf("copy mode %v %v, want 0555 (no write bit)", fi.Mode(), err)
			}
			c.prepare(t, b, src, sum)
			p2, err := b.Materialize("p", src, sum)
			if got := errCode(err); got != c.want {
				t.Fatalf("second Materialize: %v, want code %q", err, c.want)
			}
			if err == nil && p2 != p {
				t.Fatalf("copy moved: %s", p2)
			}
			if c.content != "" {
				if data, _ := os.ReadFile(p); string(data) != c.content {
					t.Fatalf("copy holds %q, want %q", data, c.content)
				}
			}
			// A fresh store (another kernel) over the same directory agrees.
			b2, _ := OpenBinaryStore(filepath.Join(home, "cas"))
			if _, err := b2.Materialize("p", src, sum); errCode(err) != c.want {
				t.Fatalf("fresh store: %v, want code %q", err, c.want)
			}
		})
	}
}

func TestBinaryStoreRefusesWrongSum(t *testing.T) {
	b, err := OpenBinaryStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "plugin")
	writeFile(t, src, "good")
	for _, want := range []string{"", "abc", "0000000000000000000000000000000000000000000000000000000000000000"} {
		if _, err := b.Materialize("p", src, want); errCode(err) != CodeBinaryMismatch {
			t.Fatalf("sum %q: %v", want, err)
		}
	}
	if ents, _ := os.ReadDir(b.Dir()); len(ents) != 0 {
		t.Fatalf("a refused binary left files: %v", ents)
	}
}

func errCode(err error) string {
	if err == nil {
		return ""
	}
	return uerr.From(err).Code
}

// BenchmarkMaterialize is the cost a plugin start pays for "what runs is
// the bytes checked": cached (unchanged source and copy: two stats) and
// cold (a new process: copy while hashing).
func BenchmarkMaterialize(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	sum, err := manifests.FileSHA256(exe)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("cached", func(b *testing.B) {
		s, _ := OpenBinaryStore(b.TempDir())
		if _, err := s.Materialize("p", exe, sum); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := s.Materialize("p", exe, sum); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cold", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			s, _ := OpenBinaryStore(dir)
			_ = os.RemoveAll(s.Path(sum))
			if _, err := s.Materialize("p", exe, sum); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestBinaryStoreKeepsTheCopyOtherKernelsRun: a second kernel on the same
// home verifying the same binary leaves the store's file in place (same
// inode, still linked) instead of renaming a new copy over it: sandboxes
// of the first kernel bind-mount that inode, and a rename unlinked it
// under them (a plugin's /proc/self/exe then named "/", and test.run,
// which re-executes itself, failed with `exec: "/": is a directory` when
// ten kernels started at once).
func TestBinaryStoreKeepsTheCopyOtherKernelsRun(t *testing.T) {
	home := t.TempDir()
	src := filepath.Join(t.TempDir(), "plugin")
	sum := writeFile(t, src, "good")
	inode := func(p string) (uint64, uint64) {
		t.Helper()
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino, uint64(st.Nlink) //nolint:unconvert // Nlink is not uint64 everywhere
	}
	b1, err := OpenBinaryStore(filepath.Join(home, "cas"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := b1.Materialize("p", src, sum)
	if err != nil {
		t.Fatal(err)
	}
	running, err := os.Open(p) // what a sandbox holds
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	ino, _ := inode(p)
	for i := range 3 {
		b, err := OpenBinaryStore(filepath.Join(home, "cas"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Materialize("p", src, sum); err != nil {
			t.Fatalf("kernel %d: %v", i+2, err)
		}
		if got, links := inode(p); got != ino || links != 1 {
			t.Fatalf("kernel %d replaced the store's copy: inode %d (links %d), was %d", i+2, got, links, ino)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(running.Fd()), &st); err != nil || st.Nlink != 1 {
		t.Fatalf("the running copy was unlinked: links %d %v", st.Nlink, err)
	}
	if ents, _ := os.ReadDir(b1.Dir()); len(ents) != 1 {
		t.Fatalf("store holds %d entries, want the one copy (no temporary left)", len(ents))
	}
}
