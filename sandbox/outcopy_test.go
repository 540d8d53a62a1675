package sandbox

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

type tarEntry struct {
	name string
	typ  byte
	size int64 // header size; data is written only for regular files
	link string
}

func archiveOf(t *testing.T, ents []tarEntry) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Size: e.size, Mode: 0o644, Linkname: e.link, ModTime: time.Unix(1700000000, 0)}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(bytes.Repeat([]byte{'x'}, int(e.size))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &b
}

func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// TestCopyOut: only regular files and directories below the archive's top
// directory reach the host, never past the limit, and what the sandbox
// deleted since the last copy goes from the host too.
func TestCopyOut(t *testing.T) {
	for _, tc := range []struct {
		name     string
		before   []string // host files present before the copy
		ents     []tarEntry
		limit    int64
		wantOver bool
		want     []string
		maxBytes int64 // most file data the host may hold afterwards
	}{
		{name: "files and dirs", limit: 1 << 20,
			ents: []tarEntry{{"out/", tar.TypeDir, 0, ""}, {"out/op1/", tar.TypeDir, 0, ""}, {"out/op1/a", tar.TypeReg, 10, ""}, {"out/b", tar.TypeReg, 5000, ""}},
			want: []string{"b", "op1", "op1/a"}, maxBytes: 5010},
		{name: "links devices and escapes are not copied", limit: 1 << 20,
			ents: []tarEntry{{"out/", tar.TypeDir, 0, ""}, {"out/l", tar.TypeSymlink, 0, "/etc/passwd"}, {"out/h", tar.TypeLink, 0, "out/x"},
				{"out/f", tar.TypeFifo, 0, ""}, {"out/../escape", tar.TypeReg, 3, ""}, {"/abs", tar.TypeReg, 3, ""}, {"out/ok", tar.TypeReg, 2, ""}},
			want: []string{"ok"}, maxBytes: 2},
		{name: "stale host files are pruned", limit: 1 << 20, before: []string{"gone", "op9/old"},
			ents: []tarEntry{{"out/", tar.TypeDir, 0, ""}, {"out/new", tar.TypeReg, 1, ""}},
			want: []string{"new"}, maxBytes: 1},
		{name: "a full tmpfs is over", limit: 3 * outPage,
			ents:     []tarEntry{{"out/a", tar.TypeReg, 2*outPage + 1, ""}},
			wantOver: true, maxBytes: 3 * outPage},
		{name: "a file past the limit is never written", limit: 2 * outPage,
			ents:     []tarEntry{{"out/small", tar.TypeReg, 10, ""}, {"out/huge", tar.TypeReg, 64 << 20, ""}},
			wantOver: true, maxBytes: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, p := range tc.before {
				_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
				if err := os.WriteFile(filepath.Join(dir, p), []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res, err := copyOut(archiveOf(t, tc.ents), dir, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if res.over != tc.wantOver {
				t.Fatalf("over = %v, want %v (used %d)", res.over, tc.wantOver, res.used)
			}
			if n := apparentSize(dir); n > tc.maxBytes || n > tc.limit {
				t.Fatalf("the host holds %d bytes, at most %d allowed", n, tc.maxBytes)
			}
			if !tc.wantOver {
				if got := listTree(t, dir); !slices.Equal(got, tc.want) {
					t.Fatalf("host has %q, want %q", got, tc.want)
				}
			}
		})
	}
}
