package registry

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
)

// TestRegistryHashIsTheAuthority: after install, the record's
// sha256 is what runs. A swapped stored binary, and a swapped binary with a
// re-stamped stored manifest, are both caught; the spec the supervisor gets
// carries the recorded sum, never the manifest's.
func TestRegistryHashIsTheAuthority(t *testing.T) {
	cases := []struct {
		name        string
		swap        bool
		restamp     bool
		runnableErr string // code from Runnable ("" = runs; the supervisor then checks the bytes)
		integrity   string // code from Integrity
	}{
		{"untouched", false, false, "", ""},
		{"binary swapped", true, false, "", CodeTampered},
		{"binary swapped and manifest re-stamped", true, true, CodeTampered, CodeTampered},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db, err := store.Open(ctx, store.Options{Dir: filepath.Join(t.TempDir(), "db")})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			reg := New(db, Options{Home: t.TempDir()})
			src := filepath.Join(t.TempDir(), "minimal")
			copyTree(t, "../../manifests/testdata/valid/minimal", src)
			rec, err := reg.Install(ctx, src, InstallOptions{Yes: true})
			if err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(rec.Dir, "minimal")
			if c.swap {
				if err := os.WriteFile(bin, []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if c.restamp {
				sum, _ := manifests.FileSHA256(bin)
				data, _ := os.ReadFile(rec.ManifestPath)
				stamped, err := manifests.StampSHA256(data, sum)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(rec.ManifestPath, stamped, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			spec, err := reg.Runnable("minimal")
			if code(err) != c.runnableErr {
				t.Fatalf("Runnable: %v, want code %q", err, c.runnableErr)
			}
			if err == nil && spec.SHA256 != rec.SHA256 {
				t.Fatalf("spec sha256 %s, want the recorded %s", spec.SHA256, rec.SHA256)
			}
			err = reg.Integrity(rec)
			if code(err) != c.integrity {
				t.Fatalf("Integrity: %v, want code %q", err, c.integrity)
			}
		})
	}
}

func code(err error) string {
	if err == nil {
		return ""
	}
	return uerr.From(err).Code
}
