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

// TestLiteralPrefixMatchesGeneral: the literal-prefix shortcut answers
// exactly what the general matcher answers, for random literal patterns
// (with and without a trailing "**", anchored or not, dir-only or not) over
// random paths (files and directories).
func TestLiteralPrefixMatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	names := []string{"a", "b", "src", ".fluffy", "x.go"}
	pick := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = names[rng.IntN(len(names))]
		}
		return out
	}
	shortcuts := 0
	for range 20000 {
		raw := strings.Join(pick(1+rng.IntN(3)), "/")
		switch rng.IntN(4) {
		case 0:
			raw = "/" + raw
		case 1:
			raw += "/**"
		case 2:
			raw += "/"
		}
		if rng.IntN(3) == 0 {
			raw = "/" + strings.Trim(raw, "/") + "/**"
		}
		p, err := Compile(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		general := *p
		general.lits, general.litsMore = nil, false
		if p.lits != nil {
			shortcuts++
		}
		path := strings.Join(pick(rng.IntN(5)), "/")
		if rng.IntN(2) == 0 {
			path += "/"
		}
		pth := ParsePath(path)
		if got, want := p.Match(pth), general.Match(pth); got != want {
			t.Fatalf("pattern %q path %q: shortcut %v, general %v", raw, path, got, want)
		}
	}
	if shortcuts < 1000 {
		t.Fatalf("only %d patterns took the shortcut; the test does not exercise it", shortcuts)
	}
}
