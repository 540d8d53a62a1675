package textsafe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits callers use unless they have a reason for another.
const (
	// MaxLine bounds one-line fields: an error's what/why/fix, a progress
	// message, a path in a table.
	MaxLine = 1024
	// MaxText bounds multi-line text such as a streamed block or an error
	// context.
	MaxText = 64 << 10
)

// Text returns s with every character that could act on a terminal or a
// log reader escaped, keeping newlines and tabs, and at most max bytes of
// escaped text (max <= 0: unbounded) followed by a marker
// "…[+N bytes]" counting the input bytes left out.
//
// Escaped: C0 controls (but \n and \t), DEL, C1 controls (U+0080–U+009F,
// which include the 8-bit CSI and OSC), each byte of invalid UTF-8 (as
// \xNN), the bidirectional controls (U+061C, U+200E–U+200F, U+202A–U+202E,
// U+2066–U+2069), the line and paragraph separators U+2028/U+2029 and the
// byte-order mark U+FEFF (as \u{XXXX}). A backslash is kept: escaped output
// only ever contains printable text, so Text is idempotent.
func Text(s string, max int) string { return escape(s, max, false) }

// Line is Text for a single line: newlines, carriage returns and tabs are
// escaped too (\n, \r, \t), so one record or field stays one line.
func Line(s string, max int) string { return escape(s, max, true) }

// Clean reports whether Text(s, 0) == s, cheaply (no allocation).
func Clean(s string, oneLine bool) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if needs(r, oneLine) {
			return false
		}
		i += n
	}
	return true
}

// Cap bounds s to max bytes without escaping (for fields stored, not
// shown), cutting at a rune boundary and appending the same marker as Text.
func Cap(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker(len(s)-cut)
}

func marker(n int) string { return "…[+" + strconv.Itoa(n) + " bytes]" }

func needs(r rune, oneLine bool) bool {
	switch {
	case r == '\n' || r == '\t':
		return oneLine
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
		r == 0x2028, r == 0x2029, r == 0xfeff:
		return true
	}
	return false
}

func escape(s string, max int, oneLine bool) string {
	if (max <= 0 || len(s) <= max) && Clean(s, oneLine) {
		return s
	}
	var b strings.Builder
	grow := len(s)
	if max > 0 && grow > max {
		grow = max
	}
	b.Grow(grow + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && n <= 1:
			piece = `\x` + hex2(s[i])
		case !needs(r, oneLine):
			piece = s[i : i+n]
		case r == '\n':
			piece = `\n`
		case r == '\t':
			piece = `\t`
		case r == '\r':
			piece = `\r`
		case r < 0x100:
			piece = `\x` + hex2(byte(r))
		default:
			piece = `\u{` + strconv.FormatInt(int64(r), 16) + `}`
		}
		if max > 0 && b.Len()+len(piece) > max {
			b.WriteString(marker(len(s) - i))
			return b.String()
		}
		b.WriteString(piece)
		i += n
	}
	return b.String()
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

// JSON makes a JSON document safe to print: every character Text would
// escape becomes a JSON \uXXXX escape (invalid UTF-8 becomes \ufffd), so
// the document means the same and stays valid, but carries no C1 control,
// bidi override or stray byte a terminal could act on (encoding/json
// escapes C0 controls but passes those through). Whitespace between
// tokens is kept. The input should be valid JSON; such characters can only
// occur inside its strings.
func JSON(b []byte) []byte {
	clean := true
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && n <= 1) || (r != '\n' && r != '\t' && r != '\r' && needs(r, false)) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			out = append(out, `\ufffd`...)
		case r != '\n' && r != '\t' && r != '\r' && needs(r, false):
			out = append(out, `\u`...)
			h := strconv.FormatInt(int64(r), 16)
			for k := len(h); k < 4; k++ {
				out = append(out, '0')
			}
			out = append(out, h...)
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
