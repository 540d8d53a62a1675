package patch

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxCells bounds the diff's work (old lines × new lines). Beyond it callers
// should fall back to full-file output.
const MaxCells = 16 << 20

// ErrTooLarge is returned by Unified when the inputs exceed MaxCells.
var ErrTooLarge = errors.New("files too large for a line diff")

// ErrConflict is returned by Apply when the base does not match the patch.
var ErrConflict = errors.New("patch does not apply")

// Op is one line of an alignment of two texts: Kind ' ' (in both), '-'
// (only in the old one) or '+' (only in the new one).
type Op struct {
	Kind byte
	Line string
}

func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Unified returns a unified diff (3 lines of context) turning old into new,
// or "" when they are equal.
func Unified(name string, old, new []byte) (string, error) {
	a, b := splitLines(old), splitLines(new)
	ops, err := Align(a, b)
	if err != nil {
		return "", err
	}
	if !changed(ops) {
		return "", nil
	}
	return render(name, ops), nil
}

// Align returns the operations turning lines a into lines b, a shortest
// edit (longest common subsequence), or ErrTooLarge when the lines that
// differ exceed MaxCells. Lines are compared whole, terminators included.
func Align(a, b []string) ([]Op, error) {
	// Trim the common prefix and suffix: most edits are local, so the LCS
	// table stays small.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	am, bm := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if (len(am)+1)*(len(bm)+1) > MaxCells {
		return nil, ErrTooLarge
	}
	ops := make([]Op, 0, len(a)+len(b))
	for _, l := range a[:pre] {
		ops = append(ops, Op{' ', l})
	}
	ops = append(ops, lcs(am, bm)...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, Op{' ', l})
	}
	return ops, nil
}

func changed(ops []Op) bool {
	for _, o := range ops {
		if o.Kind != ' ' {
			return true
		}
	}
	return false
}

func lcs(a, b []string) []Op {
	n, m := len(a), len(b)
	// t[i][j] = LCS length of a[i:], b[j:]
	t := make([][]int32, n+1)
	for i := range t {
		t[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	var ops []Op
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			ops = append(ops, Op{' ', a[i]})
			i++
			j++
		case t[i+1][j] >= t[i][j+1]:
			ops = append(ops, Op{'-', a[i]})
			i++
		default:
			ops = append(ops, Op{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, Op{'-', a[i]})
	}
	for ; j < m; j++ {
		ops = append(ops, Op{'+', b[j]})
	}
	return ops
}

const context = 3

func render(name string, ops []Op) string {
	var out strings.Builder
	fmt.Fprintf(&out, "--- a/%s\n+++ b/%s\n", name, name)
	// Group changes into hunks with up to `context` lines around them.
	i := 0
	oldLine, newLine := 1, 1
	for i < len(ops) {
		// find next change
		k := i
		for k < len(ops) && ops[k].Kind == ' ' {
			k++
		}
		if k == len(ops) {
			break
		}
		start := max(i, k-context)
		// advance line counters over skipped context
		for x := i; x < start; x++ {
			oldLine++
			newLine++
		}
		// extend the hunk while changes are within 2*context of each other
		end := k
		for {
			for end < len(ops) && ops[end].Kind != ' ' {
				end++
			}
			run := end
			for run < len(ops) && ops[run].Kind == ' ' && run-end < 2*context {
				run++
			}
			if run < len(ops) && ops[run].Kind != ' ' {
				end = run
				continue
			}
			end = min(len(ops), end+context)
			break
		}
		var oc, nc int
		var body strings.Builder
		for _, o := range ops[start:end] {
			body.WriteByte(o.Kind)
			body.WriteString(o.Line)
			if !strings.HasSuffix(o.Line, "\n") {
				body.WriteString("\n\\ No newline at end of file\n")
			}
			if o.Kind != '+' {
				oc++
			}
			if o.Kind != '-' {
				nc++
			}
		}
		os, ns := oldLine, newLine
		if oc == 0 {
			os--
		}
		if nc == 0 {
			ns--
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n%s", os, oc, ns, nc, body.String())
		oldLine += oc
		newLine += nc
		i = end
	}
	return out.String()
}

// Stats counts added and removed lines in a unified diff.
func Stats(diff string) (added, removed int) {
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			added++
		case strings.HasPrefix(l, "-"):
			removed++
		}
	}
	return
}

// Apply applies a unified diff made by Unified to base. Every context and
// removed line must match exactly; otherwise ErrConflict names the hunk.
func Apply(base []byte, diff string) ([]byte, error) {
	src := splitLines(base)
	var out []string
	pos := 0 // next unconsumed line of src (0-based)
	lines := strings.SplitAfter(diff, "\n")
	hunk := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "@@ ") {
			continue
		}
		hunk++
		oldStart, err := parseHunkStart(l)
		if err != nil {
			return nil, fmt.Errorf("hunk %d: %w", hunk, err)
		}
		at := oldStart - 1
		if oldStart == 0 {
			at = 0
		}
		if at < pos || at > len(src) {
			return nil, fmt.Errorf("%w: hunk %d starts at line %d, outside the file", ErrConflict, hunk, oldStart)
		}
		out = append(out, src[pos:at]...)
		pos = at
		for i+1 < len(lines) {
			b := lines[i+1]
			if b == "" || strings.HasPrefix(b, "@@ ") {
				break
			}
			i++
			noEOL := i+1 < len(lines) && strings.HasPrefix(lines[i+1], `\ No newline`)
			text := b[1:]
			if noEOL {
				text = strings.TrimSuffix(text, "\n")
				i++
			}
			switch b[0] {
			case ' ', '-':
				if pos >= len(src) || src[pos] != text {
					return nil, fmt.Errorf("%w: hunk %d: line %d of the base differs from the patch's context", ErrConflict, hunk, pos+1)
				}
				if b[0] == ' ' {
					out = append(out, text)
				}
				pos++
			case '+':
				out = append(out, text)
			default:
				return nil, fmt.Errorf("hunk %d: malformed line %q", hunk, strings.TrimSpace(b))
			}
		}
	}
	out = append(out, src[pos:]...)
	var buf bytes.Buffer
	for _, l := range out {
		buf.WriteString(l)
	}
	return buf.Bytes(), nil
}

func parseHunkStart(h string) (int, error) {
	// @@ -a,b +c,d @@
	f := strings.Fields(h)
	if len(f) < 3 || !strings.HasPrefix(f[1], "-") {
		return 0, fmt.Errorf("malformed hunk header %q", strings.TrimSpace(h))
	}
	a := strings.TrimPrefix(f[1], "-")
	if c := strings.IndexByte(a, ','); c >= 0 {
		a = a[:c]
	}
	n, err := strconv.Atoi(a)
	if err != nil {
		return 0, fmt.Errorf("malformed hunk header %q", strings.TrimSpace(h))
	}
	return n, nil
}
