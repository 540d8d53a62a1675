package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// BenchmarkIngestOneWrite is the "ingest of one write" (target p50
// < 5 ms): one fs.write patch of a 200-line file, taken into the
// changeset (database included) and shown by the next view refresh.
func BenchmarkIngestOneWrite(b *testing.B) {
	f := newIngestFixture(b, Limits{})
	ctx := context.Background()
	var lines string
	for i := 0; i < 200; i++ {
		lines += fmt.Sprintf("line %d\n", i)
	}
	write(b, f.proj, "src/big.go", lines, 0o644)
	cur := []byte(lines)
	if _, err := f.s.Prepare(ctx, toolFS()); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next := []byte(fmt.Sprintf("%s// edit %d\n", cur, i))
		d, err := patch.Unified("src/big.go", cur, next)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("op%d.patch", i)
		if err := os.WriteFile(filepath.Join(f.out, name), []byte(d), 0o644); err != nil {
			b.Fatal(err)
		}
		err = f.s.Ingest(ctx, router.Output{Plugin: "tool-fs", Tool: "fs.write", CallID: "c", Dir: f.out,
			Changes: []tool.FileChange{{Path: "src/big.go", Mode: tool.OutputPatch, Artifact: name, SHA256Before: sum(cur)}}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.s.Prepare(ctx, toolFS()); err != nil {
			b.Fatal(err)
		}
		cur = next
	}
}
