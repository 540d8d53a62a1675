package patch

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseMulti(t *testing.T) {
	cases := []struct {
		name, text string
		want       string // fmt of (op path moveTo hunks) per file; "" = error
		errHas     string
	}{
		{"envelope", "*** Begin Patch\n*** Add File: a.go\n+x\n*** Update File: b.go\n*** Move to: c.go\n@@ func B\n-1\n+2\n@@\n ctx\n-3\n+4\n*** Delete File: d.go\n*** End Patch\n",
			"[add a.go  0] [update b.go c.go 2] [delete d.go  0]", ""},
		{"envelope-crlf-and-prose-before", "Here is the patch:\r\n*** Begin Patch\r\n*** Update File: a.go\r\n-x\r\n+y\r\n*** End Patch\r\n", "[update a.go  1]", ""},
		{"unified-git", "diff --git a/a.go b/a.go\nindex 1..2 100644\n--- a/a.go\n+++ b/a.go\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n@@ -10 +10 @@\n-x\n+y\ndiff --git a/n.go b/n.go\nnew file mode 100644\n--- /dev/null\n+++ b/n.go\n@@ -0,0 +1 @@\n+n\n--- a/old.go\n+++ /dev/null\n@@ -1 +0,0 @@\n-o\n",
			"[update a.go  2] [add n.go  0] [delete old.go  1]", ""},
		{"unified-rename", "--- a/x.go\n+++ b/y.go\n@@ -1 +1 @@\n-a\n+b\n", "[update x.go y.go 1]", ""},
		{"unified-removed-line-like-header", "--- a/a.go\n+++ b/a.go\n@@ -1,2 +1,1 @@\n--- not a header\n a\n", "[update a.go  1]", ""},
		{"no-end", "*** Begin Patch\n*** Add File: a\n+x\n", "", "End Patch"},
		{"bad-add-line", "*** Begin Patch\n*** Add File: a\nx\n*** End Patch", "", "starts with +"},
		{"bad-hunk-line", "*** Begin Patch\n*** Update File: a\n@@\n*x\n*** End Patch", "", "hunk line"},
		{"move-misplaced", "*** Begin Patch\n*** Move to: b\n*** End Patch", "", "Move to"},
		{"update-no-hunk", "*** Begin Patch\n*** Update File: a\n*** End Patch", "", "no hunk"},
		{"twice", "*** Begin Patch\n*** Add File: a\n+x\n*** Update File: b\n*** Move to: a\n@@\n-1\n+2\n*** End Patch", "", "twice"},
		{"prose", "just change it", "", "neither"},
	}
	for _, c := range cases {
		fps, err := ParseMulti(c.text)
		if c.want == "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("%s: err %v, want one with %q", c.name, err, c.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var got []string
		for _, fp := range fps {
			got = append(got, fmt.Sprintf("[%s %s %s %d]", fp.Op, fp.Path, fp.MoveTo, len(fp.Hunks)))
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%s: got %s, want %s", c.name, g, c.want)
		}
	}
}

func TestApplyHunks(t *testing.T) {
	src := "package a\n\nfunc A() {\n\tx := 1\n}\n\nfunc B() {\n\tx := 1\n}\n"
	h := func(anchor string, start int, lines ...string) Hunk {
		hk := Hunk{Anchor: anchor, OldStart: start}
		for _, l := range lines {
			hk.Lines = append(hk.Lines, Line{l[0], l[1:]})
		}
		return hk
	}
	cases := []struct {
		name  string
		hunks []Hunk
		want  string // "" = conflict
		norm  bool
	}{
		{"with-context", []Hunk{h("", 0, " func A() {", "-\tx := 1", "+\tx := 2")}, strings.Replace(src, "x := 1", "x := 2", 1), false},
		{"two-hunks-in-order", []Hunk{h("", 0, " func A() {", "-\tx := 1", "+\tx := 2"), h("", 0, " func B() {", "-\tx := 1", "+\tx := 3")},
			"package a\n\nfunc A() {\n\tx := 2\n}\n\nfunc B() {\n\tx := 3\n}\n", false},
		{"anchor-picks-B", []Hunk{h("func B() {", 0, "-\tx := 1", "+\tx := 2")}, "package a\n\nfunc A() {\n\tx := 1\n}\n\nfunc B() {\n\tx := 2\n}\n", false},
		{"line-number-breaks-tie", []Hunk{h("", 8, "-\tx := 1", "+\tx := 3")}, "package a\n\nfunc A() {\n\tx := 1\n}\n\nfunc B() {\n\tx := 3\n}\n", false},
		{"trailing-space-normalised", []Hunk{h("", 0, " func A() {  ", "-\tx := 1", "+\tx := 4")}, strings.Replace(src, "x := 1", "x := 4", 1), true}, // the file keeps its own context text,
		{"append-at-end", []Hunk{{EndOfFile: true, Lines: []Line{{'+', "// end"}}}}, src + "// end\n", false},
		{"conflict", []Hunk{h("", 0, "-\ty := 1", "+\ty := 2")}, "", false},
	}
	var ae *AmbiguousError
	if _, _, err := ApplyHunks("a.go", []byte(src), []Hunk{h("", 0, "-\tx := 1", "+\tx := 2")}); !errors.As(err, &ae) || fmt.Sprint(ae.Lines) != "[4 8]" {
		t.Errorf("a hunk that fits lines 4 and 8 with nothing to choose by: %v", err)
	}
	for _, c := range cases {
		got, norm, err := ApplyHunks("a.go", []byte(src), c.hunks)
		if c.want == "" {
			var he *HunkError
			if !errors.As(err, &he) || he.Near != 4 {
				t.Errorf("%s: err %v, want a HunkError near line 4", c.name, err)
			}
			continue
		}
		if err != nil || string(got) != c.want || norm != c.norm {
			t.Errorf("%s: %v norm=%v\n%q\nwant %q", c.name, err, norm, got, c.want)
		}
	}
}
