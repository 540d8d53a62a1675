package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReplaceOnAFullDisk: on a real file system too small for the new
// content, Replace fails with ENOSPC and leaves the old file whole and no
// temporary behind, with and without the sync.
func TestReplaceOnAFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test mounts a tmpfs and needs root, and CI must run it")
		}
		t.Skip("this test mounts a tmpfs: run it as root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	old := bytes.Repeat([]byte("o"), 64<<10)
	for _, o := range []Options{{}, {NoSync: true}, {Temp: ".op-1.tmp"}} {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Fatal(err)
		}
		err := Replace(OS{}, path, 0o644, o, func(w io.Writer) error {
			_, err := w.Write(bytes.Repeat([]byte("n"), 2<<20))
			return err
		})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%+v: Replace on a full disk: %v, want ENOSPC", o, err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
			t.Fatalf("%+v: the old file is not whole after ENOSPC (%d bytes)", o, len(got))
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Fatalf("%+v: left behind: %v", o, ents)
		}
	}
}
