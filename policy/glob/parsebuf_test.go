package glob

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// refParse is the original ParsePath: trim the slashes, split, drop "" and
// "." segments.
func refParse(p string) ([]string, bool) {
	isDir := strings.HasSuffix(p, "/")
	var segs []string
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s != "" && s != "." {
			segs = append(segs, s)
		}
	}
	return segs, isDir
}

func TestParsePathBufMatchesReference(t *testing.T) {
	cases := []string{"", "/", "//", ".", "./", "a", "a/", "/a", "a//b", "./a/./b/.", "a/../b", "...", "a/.b/..c/",
		"src/pkg/deep/file.go", strings.Repeat("d/", 40) + "f"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = "/.ab"[rng.IntN(4)]
		}
		cases = append(cases, string(b))
	}
	var stack [4]string
	for _, p := range cases {
		want, wantDir := refParse(p)
		for _, got := range []Path{ParsePath(p), ParsePathBuf(stack[:0], p)} {
			if !slices.Equal(got.segs, want) || got.isDir != wantDir {
				t.Fatalf("parse %q = %q dir=%v, want %q dir=%v", p, got.segs, got.isDir, want, wantDir)
			}
		}
		if got := ParsePathBuf(stack[:0], p); got.HasSegment("..") != slices.Contains(want, "..") {
			t.Fatalf("HasSegment(..) wrong for %q", p)
		}
	}
}
