package toolcall

import (
	"slices"
	"testing"
)

func TestNameCandidates(t *testing.T) {
	cases := []struct {
		in   string
		want string // must be among the candidates ("" = none at all)
	}{
		{"fs_read", "fs.read"},
		{"fs-read", "fs.read"},
		{"functions.fs.read", "fs.read"},
		{"functions.fs_read", "fs.read"},
		{"fs.Read", "fs.read"},
		{"FS.READ", "fs.read"},
		{"fs_apply_patch", "fs.apply_patch"},
		{"fs-apply-patch", "fs.apply_patch"},
		{"plan_complete", "plan.complete"},
		{"fs.read", ""}, // already canonical: nothing else to try first
		{"a.b.c.d.e.f.g.h", ""},
	}
	for _, c := range cases {
		got := NameCandidates(c.in)
		if c.want == "" {
			if c.in == "fs.read" && slices.Contains(got, "fs.read") {
				t.Errorf("%s: candidates %v repeat the name", c.in, got)
			}
			if c.in != "fs.read" && got != nil {
				t.Errorf("%s: want no candidates, got %d", c.in, len(got))
			}
			continue
		}
		if !slices.Contains(got, c.want) {
			t.Errorf("%s: candidates %v lack %s", c.in, got, c.want)
		}
	}
	if got := NameCandidates("fs_read"); got[0] != "fs.read" {
		t.Errorf("the dotted spelling must come first: %v", got)
	}
}

func TestUnwrapArgs(t *testing.T) {
	cases := []struct {
		name, in string
		want     string // "" = not repaired
		repairs  int
	}{
		{"object", `{"path":"a"}`, "", 0},
		{"json-string", `"{\"path\":\"a\"}"`, `{"path":"a"}`, 1},
		{"fence-json", "```json\n{\"path\":\"a\"}\n```", `{"path":"a"}`, 1},
		{"fence-bare", "```\n{\"path\":\"a\"}\n```", `{"path":"a"}`, 1},
		{"string-of-fence", `"` + "```json\\n{\\\"path\\\":\\\"a\\\"}\\n```" + `"`, `{"path":"a"}`, 2},
		{"string-not-object", `"hello"`, "", 0},
		{"array", `[{"path":"a"}]`, "", 0},
		{"fence-unclosed", "```json\n{\"path\":\"a\"}", "", 0},
		{"fence-with-prose", "```json\n{\"path\":\"a\"}\n```\nand more", "", 0},
		{"two-fences", "```json\n{}\n```\n```json\n{}\n```", "", 0},
		{"garbage", `{"path":`, "", 0},
	}
	for _, c := range cases {
		got, rep, ok := UnwrapArgs([]byte(c.in))
		if c.want == "" {
			if ok {
				t.Errorf("%s: repaired to %s", c.name, got)
			}
			continue
		}
		if !ok || string(got) != c.want || len(rep) != c.repairs {
			t.Errorf("%s: got %s %v %v", c.name, got, rep, ok)
		}
	}
}
