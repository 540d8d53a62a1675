package patch

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	cases := []struct{ name, old, new string }{
		{"equal", "a\nb\n", "a\nb\n"},
		{"create", "", "a\nb\n"},
		{"delete-all", "a\nb\n", ""},
		{"middle", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\n2\n3\n4\nX\n6\n7\n8\n9\n10\n"},
		{"two-hunks", strings.Repeat("l\n", 20) + "a\n" + strings.Repeat("m\n", 20), "b\n" + strings.Repeat("l\n", 20) + "a\n" + strings.Repeat("m\n", 20) + "z\n"},
		{"no-eol-old", "a\nb", "a\nc\n"},
		{"no-eol-new", "a\nb\n", "a\nb"},
		{"append", "a\n", "a\nb\nc\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Unified("f.go", []byte(c.old), []byte(c.new))
			if err != nil {
				t.Fatal(err)
			}
			if c.old == c.new {
				if d != "" {
					t.Fatalf("equal inputs gave diff %q", d)
				}
				return
			}
			got, err := Apply([]byte(c.old), d)
			if err != nil {
				t.Fatalf("apply: %v\n%s", err, d)
			}
			if string(got) != c.new {
				t.Fatalf("got %q want %q\n%s", got, c.new, d)
			}
		})
	}
}

func TestRandomRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a\n", "b\n", "c\n", "d\n", "e"}
	gen := func() string {
		var b strings.Builder
		for range r.IntN(30) {
			b.WriteString(words[r.IntN(len(words)-1)])
		}
		if r.IntN(4) == 0 {
			b.WriteString("e")
		}
		return b.String()
	}
	for i := range 2000 {
		o, n := gen(), gen()
		d, err := Unified("x", []byte(o), []byte(n))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Apply([]byte(o), d)
		if err != nil || string(got) != n {
			t.Fatalf("case %d: old %q new %q diff\n%s\ngot %q err %v", i, o, n, d, got, err)
		}
	}
}

func TestApplyConflict(t *testing.T) {
	d, _ := Unified("f", []byte("a\nb\nc\n"), []byte("a\nB\nc\n"))
	_, err := Apply([]byte("a\nchanged\nc\n"), d)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("want ErrConflict, got %v", err)
	}
}

func TestStats(t *testing.T) {
	d, _ := Unified("f", []byte("a\nb\n"), []byte("a\nc\nd\n"))
	add, rem := Stats(d)
	if add != 2 || rem != 1 {
		t.Fatalf("stats %d %d\n%s", add, rem, d)
	}
}
