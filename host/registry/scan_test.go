package registry

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/store"
)

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, fi.Mode())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScanDiscoversAndRejects: discovery of a plugins directory registers
// valid, compatible manifests in place and records the rest as rejected
// with their reason; a re-scan keeps what the user decided (disabled).
func TestScanDiscoversAndRejects(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{Dir: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := New(db, Options{Home: t.TempDir()})

	dir := t.TempDir()
	copyTree(t, "../../manifests/testdata/valid/tool-fs", filepath.Join(dir, "tool-fs"))
	copyTree(t, "../../manifests/testdata/valid/minimal", filepath.Join(dir, "minimal"))
	os.MkdirAll(filepath.Join(dir, "broken"), 0o755)
	b, _ := os.ReadFile("../../manifests/testdata/invalid/bad-kind.yaml")
	os.WriteFile(filepath.Join(dir, "broken", "plugin.yaml"), b, 0o644)
	// A correct manifest whose binary was swapped after stamping.
	copyTree(t, "../../manifests/testdata/valid/minimal", filepath.Join(dir, "tampered"))
	os.WriteFile(filepath.Join(dir, "tampered", "minimal"), []byte("not the stamped binary"), 0o755)

	found, err := reg.Scan(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 4 {
		t.Fatalf("found %d, want 4: %+v", len(found), found)
	}
	installed, _ := reg.List(Filter{})
	rejected, _ := reg.List(Filter{Rejected: true})
	if len(installed) != 2 || len(rejected) != 2 {
		t.Fatalf("registered %d, rejected %d", len(installed), len(rejected))
	}
	codes := map[string]bool{}
	for _, r := range rejected {
		codes[r.ErrorCode] = true
		if r.ManifestPath == "" || r.Reason == "" {
			t.Fatalf("rejected record lacks path or reason: %+v", r)
		}
	}
	if !codes["MANIFEST_INVALID"] || !codes["MANIFEST_CHECKSUM_MISMATCH"] {
		t.Fatalf("rejection codes %v", codes)
	}
	for _, r := range installed {
		if r.State != StateRegistered || r.Dir == "" {
			t.Fatalf("discovered record: %+v", r)
		}
		// Not scanned as a builtin directory: a core_plugin claim is dropped.
		if r.HasTag(TagCore) || !r.HasTag(TagThirdParty) {
			t.Fatalf("discovered outside a builtin dir keeps tags %v", r.Tags)
		}
	}

	if err := reg.Disable(ctx, "minimal", "not today"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Scan(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	if r, _ := reg.Get("minimal"); r.State != StateDisabled || r.Reason != "not today" {
		t.Fatalf("re-scan undid the user's disable: %+v", r)
	}
	if _, err := reg.Runnable("minimal"); err == nil {
		t.Fatal("a disabled plugin must not be runnable")
	}
	if _, err := reg.Runnable("tool-fs"); err != nil {
		t.Fatalf("discovered tool-fs not runnable: %v", err)
	}
}

func TestScanOfBuiltinDirKeepsCoreTag(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{Dir: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := New(db, Options{Home: t.TempDir()})
	dir := t.TempDir()
	copyTree(t, "../../manifests/testdata/valid/tool-fs", filepath.Join(dir, "tool-fs"))
	if _, err := reg.Scan(ctx, dir, []string{dir}); err != nil {
		t.Fatal(err)
	}
	r, err := reg.Get("tool-fs")
	if err != nil || !r.HasTag(TagCore) || r.HasTag(TagThirdParty) {
		t.Fatalf("builtin tool-fs: %v %+v", err, r.Tags)
	}
}

// TestRescanRemembersOnlyWhatItHashed: a re-scan does not hash a binary
// again when its stamp is unchanged, but a binary swapped after the first
// scan (same size, mtime put back) is hashed and rejected.
func TestRescanRemembersOnlyWhatItHashed(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{Dir: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := New(db, Options{Home: t.TempDir()})
	dir := t.TempDir()
	copyTree(t, "../../manifests/testdata/valid/minimal", filepath.Join(dir, "minimal"))
	if _, err := reg.Scan(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	r, err := reg.Get("minimal")
	if err != nil || r.EntryStamp == "" {
		t.Fatalf("first scan: %+v, %v", r, err)
	}
	if _, err := reg.Scan(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	if again, _ := reg.Get("minimal"); again.EntryStamp != r.EntryStamp || again.State != StateRegistered {
		t.Fatalf("unchanged re-scan: %+v", again)
	}

	bin := filepath.Join(dir, "minimal", "minimal")
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(bin)
	b[len(b)-1] ^= 0xff
	time.Sleep(20 * time.Millisecond)
	if err := os.WriteFile(bin, b, fi.Mode()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(bin, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Scan(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	rejected, _ := reg.List(Filter{Rejected: true})
	if len(rejected) != 1 || rejected[0].ErrorCode != "MANIFEST_CHECKSUM_MISMATCH" {
		t.Fatalf("swapped binary after a remembered scan: rejected %+v", rejected)
	}
}
