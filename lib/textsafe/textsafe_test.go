package textsafe

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	cases := []struct {
		name, in, text, line string
	}{
		{"plain", "hello, wörld ✓", "hello, wörld ✓", "hello, wörld ✓"},
		{"newline and tab", "a\nb\tc", "a\nb\tc", `a\nb\tc`},
		{"csi clear screen", "\x1b[2J\x1b[Hchain OK", `\x1b[2J\x1b[Hchain OK`, `\x1b[2J\x1b[Hchain OK`},
		{"osc title", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`, `\x1b]0;pwned\x07`},
		{"carriage return", "ok\rFAKE", `ok\rFAKE`, `ok\rFAKE`},
		{"del", "a\x7fb", `a\x7fb`, `a\x7fb`},
		{"c1 csi", "a\u009b2Jb", `a\x9b2Jb`, `a\x9b2Jb`},
		{"invalid utf8", "a\xff\xfeb", `a\xff\xfeb`, `a\xff\xfeb`},
		{"raw 8-bit csi byte", "a\x9b2J", `a\x9b2J`, `a\x9b2J`},
		{"bidi override", "abc\u202edcba", `abc\u{202e}dcba`, `abc\u{202e}dcba`},
		{"bidi isolate", "\u2066x\u2069", `\u{2066}x\u{2069}`, `\u{2066}x\u{2069}`},
		{"line separator", "a\u2028b", `a\u{2028}b`, `a\u{2028}b`},
		{"backslash kept", `C:\dir\x1b`, `C:\dir\x1b`, `C:\dir\x1b`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Text(c.in, 0); got != c.text {
				t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
			}
			if got := Line(c.in, 0); got != c.line {
				t.Errorf("Line(%q) = %q, want %q", c.in, got, c.line)
			}
			if got := Text(Text(c.in, 0), 0); got != Text(c.in, 0) {
				t.Errorf("Text is not idempotent on %q: %q", c.in, got)
			}
		})
	}
}

func TestBounded(t *testing.T) {
	cases := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short stays", "abc", 10, "abc"},
		{"cut with marker", strings.Repeat("a", 100), 10, "aaaaaaaaaa…[+90 bytes]"},
		{"escapes count toward the bound", strings.Repeat("\x1b", 10), 8, `\x1b\x1b…[+8 bytes]`},
		{"never splits a rune", "ééééé", 3, "é…[+8 bytes]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Text(c.in, c.max); got != c.want {
				t.Errorf("Text(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
			}
		})
	}
	if got := Cap("ééé", 3); got != "é…[+4 bytes]" {
		t.Errorf("Cap = %q", got)
	}
	if got := Cap("abc", 3); got != "abc" {
		t.Errorf("Cap short = %q", got)
	}
}

// FuzzLine: whatever goes in, what comes out is valid UTF-8 with no
// control, C1 or bidi character, and is bounded.
func FuzzLine(f *testing.F) {
	for _, s := range []string{"\x1b[2J", "a\u202eb", "\xff", "ok\r\n", "\u009b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Line(s, 64)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q: %q", s, out)
		}
		for _, r := range out {
			if needs(r, true) {
				t.Fatalf("%q left %U in %q", s, r, out)
			}
		}
		if len(out) > 64+len(marker(len(s))) {
			t.Fatalf("unbounded: %d bytes", len(out))
		}
	})
}

func TestJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"a":"plain ✓"}`, `{"a":"plain ✓"}`},
		{"{\"a\":\"x\u009b2Jy\"}", `{"a":"x\u009b2Jy"}`},
		{"{\"a\":\"\u202eevil\"}", `{"a":"\u202eevil"}`},
		{"{\"a\":\"\xff\"}", `{"a":"\ufffd"}`},
		{"{\n\t\"a\": 1\n}", "{\n\t\"a\": 1\n}"},
	}
	for _, c := range cases {
		got := string(JSON([]byte(c.in)))
		if got != c.want {
			t.Errorf("JSON(%q) = %q, want %q", c.in, got, c.want)
		}
		if !json.Valid([]byte(got)) && json.Valid([]byte(c.in)) {
			t.Errorf("JSON(%q) broke the document: %q", c.in, got)
		}
		var a, b any
		if json.Unmarshal([]byte(c.in), &a) == nil && utf8.ValidString(c.in) {
			_ = json.Unmarshal([]byte(got), &b)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("JSON(%q) changed the meaning: %v vs %v", c.in, a, b)
			}
		}
	}
}
