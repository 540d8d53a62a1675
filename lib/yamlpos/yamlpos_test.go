package yamlpos

import (
	"errors"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

func parse(t *testing.T, src string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

func TestFieldPositions(t *testing.T) {
	root := parse(t, "a: 1\nb:\n  c: x\nd: {e: 1}\nf:\n  - 1\n")
	want := map[string]Pos{"a": {1, 4}, "b": {2, 1}, "d": {4, 4}, "f": {5, 1}}
	got := map[string]Pos{}
	_ = Pairs(root, "", func(p Pair) error { got[p.Path] = Field(p.Key, p.Value); return nil })
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s at %v, want %v", k, got[k], w)
		}
	}
	if Of(nil) != (Pos{}) {
		t.Error("nil has a position")
	}
}

func TestLeavesAndRepeats(t *testing.T) {
	root := parse(t, "x:\n  y:\n    z: 1\n  w: [1]\nv: 2\nv: 3\n")
	var paths []string
	Leaves(root, func(p Pair) { paths = append(paths, p.Path) })
	if want := []string{"x.y.z", "x.w", "v", "v"}; !slices.Equal(paths, want) {
		t.Fatalf("leaves %v, want %v", paths, want)
	}
	seen := Seen{}
	var dupLine int
	_ = Pairs(root, "", func(p Pair) error {
		if line, dup := seen.Repeat(p.Key); dup {
			dupLine = line
		}
		return nil
	})
	if dupLine != 5 {
		t.Fatalf("repeated v first on line %d, want 5", dupLine)
	}
	stop := errors.New("stop")
	n := 0
	if err := Pairs(root, "", func(Pair) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("Pairs did not stop at the first error: %v after %d", err, n)
	}
}

func TestKind(t *testing.T) {
	for src, want := range map[string]string{"a: 1": "mapping", "[1]": "list", "x": "scalar"} {
		if got := Kind(parse(t, src)); got != want {
			t.Errorf("%s: %s, want %s", src, got, want)
		}
	}
}

func TestValue(t *testing.T) {
	root := parse(t, "a: 1\nb: 2\nb: 3\n")
	if v := Value(root, "b"); v == nil || v.Value != "2" {
		t.Fatalf("Value(b) = %v, want the first b", v)
	}
	if Value(root, "c") != nil || Value(parse(t, "[1]"), "a") != nil {
		t.Fatal("Value found what is not there")
	}
}
