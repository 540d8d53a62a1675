package commit

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/merge"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestFromMerge(t *testing.T) {
	dir := t.TempDir()
	content := func(name, s string) (string, string) {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		h := sha256.Sum256([]byte(s))
		return p, hex.EncodeToString(h[:])
	}
	a, ha := content("a", "package a\n")
	c, hc := content("c", "conflicting\n")
	op := &merge.Operation{Files: []merge.OpFile{
		{Path: "src/a.go", Content: a, New: ha, Status: merge.FileLanded},
		{Path: "old.txt", Delete: true, Status: merge.FileLanded},
		{Path: "src/c.go", Content: c, New: hc, Status: merge.FileConflict},
	}}
	req, err := FromMerge(op, "msg", "fluffy", "f@l")
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Files) != 2 || req.Files[0].Path != "src/a.go" || string(req.Files[0].Content) != "package a\n" || !req.Files[1].Delete || req.Message != "msg" {
		t.Fatalf("%+v", req)
	}
	// The content file changed after the merge: refused, not committed.
	os.WriteFile(a, []byte("package a // edited\n"), 0o644)
	if _, err := FromMerge(op, "msg", "fluffy", "f@l"); !uerr.HasCode(err, CodeBadRequest) {
		t.Fatalf("tampered content: %v", err)
	}
}
