package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/diskfree"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// guardChildEnv runs TestHelperDiskGuardFill as the process that fills the
// disk: "<case> <mountpoint>".
const guardChildEnv = "FLUFFY_STORE_GUARD_CHILD"

// guardValue is what write i stores: under badger's value threshold, so
// it goes through the memory-mapped write-ahead log and memtable, and
// random, so the tables it is flushed into are as large as the data.
func guardValue(i int) []byte {
	var seed [32]byte
	binary.BigEndian.PutUint64(seed[:], uint64(i))
	b := make([]byte, 256<<10)
	_, _ = rand.NewChaCha8(seed).Read(b)
	return b
}

func guardKey(i int) []byte { return fmt.Appendf(nil, "t/%06d", i) }

// TestDiskGuard fills a small tmpfs under a real database, in a child
// process, until the guard refuses a write, then fills it to the last
// byte as another program would. Without the guard badger's next write
// into its mapped log is a SIGBUS that kills the process. With it, every
// acknowledged write is kept, later writes fail with DISK_FULL, reads go
// on, Close either closes (space freed first) or leaves the database
// unflushed (still full) without crashing, and the database opens with
// all of it once space is freed.
func TestDiskGuard(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		name string
		cs   string // what the child does: see TestHelperDiskGuardFill
	}{
		{"closed after space is freed", "freed"},
		{"closed on the full disk", "full"},
		{"shared database closed on the full disk", "shared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mnt := t.TempDir()
			size := cliReserve() + 24<<20
			mountTmpfs(t, mnt, size)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDiskGuardFill$", "-test.v")
			cmd.Env = append(os.Environ(), guardChildEnv+"="+tc.cs+" "+mnt)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the process that filled the disk failed (%v; a SIGBUS is badger writing a page the full disk cannot back):\n%s", err, tail(out))
			}
			m := regexp.MustCompile(`acked=(\d+)`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("the child reported nothing:\n%s", tail(out))
			}
			acked, _ := strconv.Atoi(string(m[1]))
			t.Logf("%d writes of 256 KiB acknowledged before DISK_FULL (reserve %s, tmpfs %s)", acked, diskfree.MiB(cliReserve()), diskfree.MiB(size))
			// Space is freed: the filler goes and the file system grows.
			_ = os.Remove(filepath.Join(mnt, "fill"))
			remount(t, mnt, size+128<<20)
			db, err := Open(context.Background(), Options{Dir: filepath.Join(mnt, "db")})
			if err != nil {
				t.Fatalf("open after space was freed: %v", err)
			}
			defer db.Close()
			for i := 0; i < acked; i++ {
				if err := db.View(func(txn *badger.Txn) error {
					it, err := txn.Get(guardKey(i))
					if err != nil {
						return err
					}
					return it.Value(func(v []byte) error {
						if !bytes.Equal(v, guardValue(i)) {
							return errors.New("wrong value")
						}
						return nil
					})
				}); err != nil {
					t.Fatalf("acknowledged write %d of %d is not there after the reopen: %v", i, acked, err)
				}
			}
			if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("t/after"), []byte("x")) }); err != nil {
				t.Fatalf("write after space was freed: %v", err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHelperDiskGuardFill is TestDiskGuard's filling process, like the
// package's other TestHelper processes: outside it there is nothing to do.
func TestHelperDiskGuardFill(t *testing.T) {
	var cs, mnt string
	if _, err := fmt.Sscan(os.Getenv(guardChildEnv), &cs, &mnt); err != nil {
		return // not the helper process
	}
	ctx := context.Background()
	dir := filepath.Join(mnt, "db")
	if cs == "shared" {
		sharedChild(t, mnt, dir)
		return
	}
	db, err := Open(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for ; ; acked++ {
		err = db.Update(func(txn *badger.Txn) error { return txn.Set(guardKey(acked), guardValue(acked)) })
		if err != nil {
			break
		}
	}
	fmt.Printf("acked=%d\n", acked)
	if !uerr.HasCode(err, CodeDiskFull) {
		t.Fatalf("write %d failed with %v, want DISK_FULL", acked, err)
	}
	select {
	case <-db.Full():
	default:
		t.Fatal("Full is not closed after a DISK_FULL refusal")
	}
	// Another program takes the rest, to the last byte, once badger has
	// flushed what it accepted: a flush or compaction that is under way
	// when the last byte goes still faults (see the decision record).
	settle(t, dir)
	fillUp(t, filepath.Join(mnt, "fill"))
	if free, _ := diskfree.Free(mnt); free != 0 {
		t.Fatalf("%d bytes still free after filling", free)
	}
	for name, write := range map[string]func() error{
		"Update": func() error {
			return db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("t/x"), []byte("x")) })
		},
		"WriteBatch": func() error {
			return db.WriteBatch(func(wb *badger.WriteBatch) error { return wb.Set([]byte("t/x"), []byte("x")) })
		},
	} {
		if err := write(); !uerr.HasCode(err, CodeDiskFull) {
			t.Fatalf("%s on the full disk: %v, want DISK_FULL", name, err)
		}
	}
	if err := db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(guardKey(acked - 1))
		return err
	}); err != nil {
		t.Fatalf("read on the full disk: %v", err)
	}
	if cs == "freed" {
		if err := os.Remove(filepath.Join(mnt, "fill")); err != nil {
			t.Fatal(err)
		}
		remount(t, mnt, cliReserve()+256<<20)
		if err := db.Close(); err != nil {
			t.Fatalf("Close after space was freed: %v", err)
		}
		// The same process opens it again and writes.
		db, err = Open(ctx, Options{Dir: dir})
		if err != nil {
			t.Fatalf("reopen after space was freed: %v", err)
		}
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("t/reopened"), []byte("x")) }); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := db.Close(); !uerr.HasCode(err, CodeDiskFull) {
		t.Fatalf("Close on the full disk: %v, want DISK_FULL (left unflushed)", err)
	}
	if _, err := Open(ctx, Options{Dir: dir}); !uerr.HasCode(err, CodeDiskFull) && !uerr.HasCode(err, CodeLocked) {
		t.Fatalf("reopen in the process that left it unflushed: %v, want DISK_FULL or STORE_LOCKED", err)
	}
}

// sharedChild fills the disk under a Shared database (the home
// database's kind, which compacts level 0 as it closes): once it was left
// unflushed on the full disk, this process gets DISK_FULL at once, even
// after space is freed, instead of waiting out the directory lock badger
// still holds.
func sharedChild(t *testing.T, mnt, dir string) {
	s := NewShared(SharedOptions{Options: Options{Dir: dir}, Linger: time.Minute})
	acked := 0
	var err error
	for ; ; acked++ {
		if err = s.Update(func(txn *badger.Txn) error { return txn.Set(guardKey(acked), guardValue(acked)) }); err != nil {
			break
		}
	}
	fmt.Printf("acked=%d\n", acked)
	if !uerr.HasCode(err, CodeDiskFull) {
		t.Fatalf("write %d failed with %v, want DISK_FULL", acked, err)
	}
	settle(t, dir)
	fillUp(t, filepath.Join(mnt, "fill"))
	if err := s.Close(); err != nil || s.Open() {
		t.Fatalf("Close: %v, still open %v", err, s.Open())
	}
	// Even with space freed, badger's directory lock is this process's
	// until it exits.
	if err := os.Remove(filepath.Join(mnt, "fill")); err != nil {
		t.Fatal(err)
	}
	remount(t, mnt, cliReserve()+256<<20)
	start := time.Now()
	err = s.Update(func(txn *badger.Txn) error { return txn.Set([]byte("t/x"), []byte("x")) })
	if !uerr.HasCode(err, CodeDiskFull) || time.Since(start) > time.Second {
		t.Fatalf("Update after the database was left unflushed: %v after %v, want DISK_FULL at once", err, time.Since(start))
	}
}

// cliReserve is the reserve of a database opened with the CLI sizes.
func cliReserve() int64 {
	return Reserve(badgerOptions(Options{Dir: "db", Logger: hclog.NewNullLogger()}))
}

// settle waits until badger's background work on dir is over: one
// write-ahead log left (the active one) and the directory unchanged for
// half a second.
func settle(t *testing.T, dir string) {
	t.Helper()
	last, since := "", time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		mems := 0
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil {
				continue
			}
			names = append(names, fmt.Sprintf("%s:%d", e.Name(), fi.Size()))
			if strings.HasSuffix(e.Name(), ".mem") {
				mems++
			}
		}
		now := strings.Join(names, " ")
		if now != last || mems != 1 {
			last, since = now, time.Now()
			continue
		}
		if time.Since(since) > 500*time.Millisecond {
			return
		}
	}
	t.Fatalf("badger did not settle in %s: %s", dir, last)
}

// needRoot skips a test that mounts a file system, unless it runs in CI,
// where it must run.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test mounts a tmpfs and needs root, and CI must run it")
		}
		t.Skip("this test mounts a tmpfs: run it as root")
	}
}

func mountTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v\n%s", dir, err, out)
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", dir).Run(); err != nil {
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
}

// remount grows the tmpfs on dir to size: space freed.
func remount(t *testing.T, dir string, size int64) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%d", size), dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s: %v\n%s", dir, err, out)
	}
}

// fillUp writes path until the file system has no byte left.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			_, err := f.Write(buf)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("fill %s: %v", path, err)
			}
		}
	}
}

// tail is the child's crash report from its first line (the faulting
// goroutine's stack follows it), else the end of its output.
func tail(b []byte) []byte {
	for _, mark := range []string{"unexpected fault address", "fatal error", "panic:", "--- FAIL"} {
		if i := bytes.Index(b, []byte(mark)); i >= 0 {
			return b[i:min(len(b), i+4000)]
		}
	}
	return b[max(0, len(b)-4000):]
}
