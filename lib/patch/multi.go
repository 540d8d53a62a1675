package patch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
)

// Operations of a FilePatch.
const (
	OpAdd    = "add"
	OpUpdate = "update"
	OpDelete = "delete"
)

// FilePatch is one file of a multi-file patch as a model writes it: the
// `*** Begin Patch` envelope of OpenAI's coding models or a plain unified
// diff. Hunks are located by their content, not their line numbers, since
// models rarely count lines right.
type FilePatch struct {
	Op   string
	Path string
	// MoveTo is the new path of an update that also renames the file.
	MoveTo string
	Hunks  []Hunk
	// Added is the content of an OpAdd file.
	Added string
}

// Hunk is one run of context, removed and added lines.
type Hunk struct {
	// Anchor is the text after `@@ ` in the envelope (a line that comes
	// before the hunk, e.g. a function header); "" when none.
	Anchor string
	// OldStart is the 1-based old line of a unified diff hunk, 0 when the
	// patch gave none. It only breaks ties between equal matches.
	OldStart int
	Lines    []Line
	// NoEOLOld/NoEOLNew mark `\ No newline at end of file` on each side.
	NoEOLOld, NoEOLNew bool
	// EndOfFile is the envelope's `*** End of File`: the hunk ends the file.
	EndOfFile bool
	// At is the hunk's line in the patch text, for error messages.
	At int
}

// Line is one hunk line: Kind ' ', '-' or '+', Text without its newline.
type Line struct {
	Kind byte
	Text string
}

// ParseError is a patch that cannot be parsed, with its line.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d of the patch: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// ParseMulti parses an envelope patch or a unified diff into its files, in
// order. It does not look at any file.
func ParseMulti(text string) ([]FilePatch, error) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	lines := strings.Split(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for _, l := range lines {
		if strings.TrimSpace(l) == "*** Begin Patch" {
			return parseEnvelope(lines)
		}
		if strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "diff --git ") {
			return parseUnified(lines)
		}
	}
	return nil, &ParseError{Msg: "the text is neither a `*** Begin Patch` envelope nor a unified diff (no `--- a/FILE` header)"}
}

// Paths lists every project path a parsed patch touches: each file, and
// each move destination.
func Paths(fps []FilePatch) []string {
	var out []string
	for _, fp := range fps {
		out = append(out, fp.Path)
		if fp.MoveTo != "" {
			out = append(out, fp.MoveTo)
		}
	}
	return out
}

func parseEnvelope(lines []string) ([]FilePatch, error) {
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) != "*** Begin Patch" {
		i++
	}
	i++
	var out []FilePatch
	ended := false
	var cur *FilePatch
	var h *Hunk
	flush := func() {
		if h != nil && cur != nil && len(h.Lines) > 0 {
			cur.Hunks = append(cur.Hunks, *h)
		}
		h = nil
		if cur != nil {
			out = append(out, *cur)
		}
		cur = nil
	}
	for ; i < len(lines); i++ {
		l := lines[i]
		n := i + 1
		switch {
		case strings.TrimSpace(l) == "*** End Patch":
			flush()
			ended = true
		case strings.HasPrefix(l, "*** Add File:"):
			flush()
			cur = &FilePatch{Op: OpAdd, Path: strings.TrimSpace(strings.TrimPrefix(l, "*** Add File:"))}
		case strings.HasPrefix(l, "*** Update File:"):
			flush()
			cur = &FilePatch{Op: OpUpdate, Path: strings.TrimSpace(strings.TrimPrefix(l, "*** Update File:"))}
		case strings.HasPrefix(l, "*** Delete File:"):
			flush()
			cur = &FilePatch{Op: OpDelete, Path: strings.TrimSpace(strings.TrimPrefix(l, "*** Delete File:"))}
		case strings.HasPrefix(l, "*** Move to:"):
			if cur == nil || cur.Op != OpUpdate || len(cur.Hunks) > 0 || h != nil {
				return nil, &ParseError{n, "`*** Move to:` must follow its `*** Update File:` line"}
			}
			cur.MoveTo = strings.TrimSpace(strings.TrimPrefix(l, "*** Move to:"))
		case strings.TrimSpace(l) == "*** End of File":
			if h == nil {
				return nil, &ParseError{n, "`*** End of File` outside a hunk"}
			}
			h.EndOfFile = true
		case ended:
			if strings.TrimSpace(l) != "" {
				return nil, &ParseError{n, "text after `*** End Patch`"}
			}
		case cur == nil:
			if strings.TrimSpace(l) != "" {
				return nil, &ParseError{n, fmt.Sprintf("%q is not in a file section; start one with `*** Add File:`, `*** Update File:` or `*** Delete File:`", textsafe.Cap(l, 80))}
			}
		case cur.Op == OpAdd:
			if !strings.HasPrefix(l, "+") {
				return nil, &ParseError{n, "every line of an added file starts with +"}
			}
			cur.Added += l[1:] + "\n"
		case cur.Op == OpDelete:
			if strings.TrimSpace(l) != "" {
				return nil, &ParseError{n, "a deleted file has no content lines"}
			}
		case l == "@@" || strings.HasPrefix(l, "@@ "):
			if h != nil && len(h.Lines) > 0 {
				cur.Hunks = append(cur.Hunks, *h)
			}
			h = &Hunk{Anchor: strings.TrimSpace(strings.TrimPrefix(l, "@@")), At: n}
			if start, ok := unifiedStart(l); ok {
				h.Anchor, h.OldStart = "", start
			}
		default:
			if h == nil {
				// The envelope allows the first hunk without an @@ line.
				h = &Hunk{At: n}
			}
			if err := addHunkLine(h, l, n); err != nil {
				return nil, err
			}
		}
	}
	if !ended {
		return nil, &ParseError{Msg: "the patch has no `*** End Patch` line (was it cut off?)"}
	}
	return checkFiles(out)
}

func addHunkLine(h *Hunk, l string, n int) error {
	switch {
	case l == "":
		// Editors and models drop the space of an empty context line.
		h.Lines = append(h.Lines, Line{' ', ""})
	case strings.HasPrefix(l, `\ `):
		if len(h.Lines) == 0 {
			return &ParseError{n, "`\\ No newline at end of file` before any line"}
		}
		switch h.Lines[len(h.Lines)-1].Kind {
		case '-':
			h.NoEOLOld = true
		case '+':
			h.NoEOLNew = true
		default:
			h.NoEOLOld, h.NoEOLNew = true, true
		}
	case l[0] == ' ' || l[0] == '-' || l[0] == '+':
		h.Lines = append(h.Lines, Line{l[0], l[1:]})
	default:
		return &ParseError{n, fmt.Sprintf("%q: a hunk line starts with a space (context), - (removed) or + (added)", textsafe.Cap(l, 80))}
	}
	return nil
}

func parseUnified(lines []string) ([]FilePatch, error) {
	var out []FilePatch
	var cur *FilePatch
	var h *Hunk
	flush := func() {
		if h != nil && cur != nil {
			cur.Hunks = append(cur.Hunks, *h)
		}
		h = nil
		if cur != nil {
			out = append(out, *cur)
		}
		cur = nil
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		n := i + 1
		header := strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ ")
		switch {
		case header:
			flush()
			from, to := diffPath(l[4:]), diffPath(lines[i+1][4:])
			i++
			switch {
			case from == "" && to == "":
				return nil, &ParseError{n, "both sides of the file header are /dev/null"}
			case from == "":
				cur = &FilePatch{Op: OpAdd, Path: to}
			case to == "":
				cur = &FilePatch{Op: OpDelete, Path: from}
			default:
				cur = &FilePatch{Op: OpUpdate, Path: from}
				if to != from {
					cur.MoveTo = to
				}
			}
		case strings.HasPrefix(l, "@@"):
			if cur == nil {
				return nil, &ParseError{n, "a hunk before any `--- a/FILE` / `+++ b/FILE` header"}
			}
			if h != nil {
				cur.Hunks = append(cur.Hunks, *h)
			}
			start, ok := unifiedStart(l)
			if !ok {
				return nil, &ParseError{n, fmt.Sprintf("%q is not a hunk header like `@@ -12,3 +12,4 @@`", textsafe.Cap(l, 80))}
			}
			h = &Hunk{OldStart: start, At: n}
		case h != nil && (l == "" || l[0] == ' ' || l[0] == '-' || l[0] == '+' || strings.HasPrefix(l, `\ `)):
			if err := addHunkLine(h, l, n); err != nil {
				return nil, err
			}
		default:
			// git's extended headers (diff --git, index, mode lines) and
			// prose between files end a hunk and are otherwise ignored.
			if h != nil && cur != nil {
				cur.Hunks = append(cur.Hunks, *h)
				h = nil
			}
		}
	}
	flush()
	// An added file's hunk holds its content.
	for i := range out {
		fp := &out[i]
		if fp.Op != OpAdd {
			continue
		}
		var b strings.Builder
		for _, hk := range fp.Hunks {
			for _, ln := range hk.Lines {
				if ln.Kind == '-' {
					return nil, &ParseError{hk.At, fmt.Sprintf("the new file %s has a removed line", fp.Path)}
				}
				b.WriteString(ln.Text + "\n")
			}
			if hk.NoEOLNew {
				fp.Added = strings.TrimSuffix(b.String(), "\n")
				b.Reset()
				b.WriteString(fp.Added)
			}
		}
		fp.Added, fp.Hunks = b.String(), nil
	}
	return checkFiles(out)
}

func checkFiles(fps []FilePatch) ([]FilePatch, error) {
	if len(fps) == 0 {
		return nil, &ParseError{Msg: "the patch changes no file"}
	}
	seen := map[string]bool{}
	for _, fp := range fps {
		if fp.Path == "" {
			return nil, &ParseError{Msg: "a file section names no path"}
		}
		for _, p := range []string{fp.Path, fp.MoveTo} {
			if p == "" {
				continue
			}
			if seen[p] {
				return nil, &ParseError{Msg: fmt.Sprintf("%s appears twice in the patch; put all of its changes in one section", p)}
			}
			seen[p] = true
		}
		if fp.Op == OpUpdate && len(fp.Hunks) == 0 && fp.MoveTo == "" {
			return nil, &ParseError{Msg: fmt.Sprintf("the update of %s has no hunk", fp.Path)}
		}
	}
	return fps, nil
}

// diffPath is the path of a unified diff file header: "" for /dev/null,
// without the a/ b/ prefix and a trailing timestamp.
func diffPath(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return ""
	}
	if strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/") {
		s = s[2:]
	}
	return s
}

// unifiedStart reads the old start line of `@@ -a,b +c,d @@`.
func unifiedStart(h string) (int, bool) {
	f := strings.Fields(h)
	if len(f) < 3 || f[0] != "@@" || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return 0, false
	}
	a := strings.TrimPrefix(f[1], "-")
	if c := strings.IndexByte(a, ','); c >= 0 {
		a = a[:c]
	}
	n, err := strconv.Atoi(a)
	return n, err == nil
}

// HunkError is a hunk whose old lines are not in the file.
type HunkError struct {
	Path string
	Hunk int // 1-based
	At   int // the hunk's line in the patch
	// Want is the first old line of the hunk; Near the file's line most
	// like it (1-based, 0 when none) and its text.
	Want     string
	Near     int
	NearText string
}

func (e *HunkError) Error() string {
	s := fmt.Sprintf("%s: hunk %d (patch line %d) does not match the file: its line %q is not where the hunk needs it", e.Path, e.Hunk, e.At, textsafe.Cap(e.Want, 80))
	if e.Near > 0 {
		s += fmt.Sprintf("; the closest line is %d: %q", e.Near, textsafe.Cap(e.NearText, 80))
	}
	return s
}

// AmbiguousError is a hunk whose lines fit more than one place and that
// gives no line number or anchor to choose by.
type AmbiguousError struct {
	Path  string
	Hunk  int   // 1-based
	At    int   // the hunk's line in the patch
	Lines []int // the first two places, 1-based
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s: hunk %d (patch line %d) fits at line %d and at line %d", e.Path, e.Hunk, e.At, e.Lines[0], e.Lines[1])
}

// ApplyHunks applies an OpUpdate's hunks to old. Each hunk's old lines
// (context and removed) must appear in order after the previous hunk:
// exactly, or else with trailing whitespace ignored (normalized reports
// that). Among several places the one nearest OldStart wins; an Anchor
// line moves the search past it; with neither, several places are an
// *AmbiguousError.
func ApplyHunks(path string, old []byte, hunks []Hunk) (out []byte, normalized bool, err error) {
	s := string(old)
	eol := strings.HasSuffix(s, "\n") || s == ""
	src := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if s == "" {
		src = nil
	}
	var res []string
	pos := 0
	for hi, h := range hunks {
		var want []string
		for _, l := range h.Lines {
			if l.Kind != '+' {
				want = append(want, l.Text)
			}
		}
		from := pos
		if h.Anchor != "" {
			a := findSeq(src, []string{h.Anchor}, from, 0, h.EndOfFile, false)
			if a < 0 {
				a = findSeq(src, []string{h.Anchor}, from, 0, false, true)
				if a < 0 {
					return nil, false, hunkErr(path, hi, h, src, h.Anchor)
				}
			}
			from = a + 1
			if len(want) > 0 && strings.TrimRight(want[0], " \t") == strings.TrimRight(h.Anchor, " \t") {
				from = a // the anchor is also the hunk's first context line
			}
		}
		at := -1
		if len(want) == 0 {
			switch {
			case h.EndOfFile || (h.OldStart == 0 && h.Anchor == ""):
				at = len(src)
			case h.Anchor != "":
				at = from
			default:
				at = min(max(h.OldStart, from), len(src)) // @@ -N,0: after line N
			}
		} else {
			loose := false
			at = findSeq(src, want, from, h.OldStart, h.EndOfFile, false)
			if at < 0 {
				loose = true
				at = findSeq(src, want, from, h.OldStart, h.EndOfFile, true)
				if at >= 0 {
					normalized = true
				}
			}
			// Without a line number or an anchor to choose, a hunk that
			// fits two places is refused, not applied to the first.
			if at >= 0 && h.OldStart == 0 && h.Anchor == "" && !h.EndOfFile {
				if again := findSeq(src, want, at+1, 0, false, loose); again >= 0 {
					return nil, false, &AmbiguousError{Path: path, Hunk: hi + 1, At: h.At, Lines: []int{at + 1, again + 1}}
				}
			}
		}
		if at < 0 {
			first := ""
			if len(want) > 0 {
				first = want[0]
			}
			return nil, false, hunkErr(path, hi, h, src[min(from, len(src)):], first, from)
		}
		res = append(res, src[pos:at]...)
		// Context lines keep the file's text (a normalised match may
		// differ from the patch's in trailing whitespace).
		oi := 0
		for _, l := range h.Lines {
			switch l.Kind {
			case ' ':
				res = append(res, src[at+oi])
				oi++
			case '-':
				oi++
			default:
				res = append(res, l.Text)
			}
		}
		pos = at + len(want)
		if pos == len(src) {
			if h.NoEOLNew {
				eol = false
			} else if h.NoEOLOld {
				eol = true
			}
		}
	}
	res = append(res, src[pos:]...)
	if len(res) == 0 {
		return []byte{}, normalized, nil
	}
	r := strings.Join(res, "\n")
	if eol {
		r += "\n"
	}
	return []byte(r), normalized, nil
}

func hunkErr(path string, hi int, h Hunk, rest []string, want string, offset ...int) *HunkError {
	e := &HunkError{Path: path, Hunk: hi + 1, At: h.At, Want: want}
	base := 0
	if len(offset) > 0 {
		base = offset[0]
	}
	if i := Closest(rest, want); i >= 0 {
		e.Near, e.NearText = base+i+1, rest[i]
	}
	return e
}

// findSeq finds want in src at or after from: the match nearest near
// (1-based; 0 = the first), the last one when it must end the file.
func findSeq(src, want []string, from, near int, atEnd, loose bool) int {
	eq := func(a, b string) bool { return a == b }
	if loose {
		eq = func(a, b string) bool { return strings.TrimRight(a, " \t\r") == strings.TrimRight(b, " \t\r") }
	}
	best := -1
	for i := max(from, 0); i+len(want) <= len(src); i++ {
		if atEnd && i+len(want) != len(src) {
			continue
		}
		ok := true
		for k := range want {
			if !eq(src[i+k], want[k]) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		if near <= 0 {
			return i
		}
		if best < 0 || abs(i+1-near) < abs(best+1-near) {
			best = i
		}
	}
	return best
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Closest returns the index of the line of lines most like want (by
// common characters after trimming), or -1 when none shares anything.
func Closest(lines []string, want string) int {
	w := strings.TrimSpace(want)
	if w == "" {
		return -1
	}
	best, bestScore := -1, 0.0
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" {
			continue
		}
		sc := similarity(w, t)
		if sc > bestScore {
			best, bestScore = i, sc
		}
	}
	if bestScore < 0.3 {
		return -1
	}
	return best
}

// similarity is 2·LCS/(len a + len b) over bytes, for short strings; long
// ones are clipped so the cost stays bounded.
func similarity(a, b string) float64 {
	const maxLen = 200
	if len(a) > maxLen {
		a = a[:maxLen]
	}
	if len(b) > maxLen {
		b = b[:maxLen]
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				cur[j] = prev[j-1] + 1
			} else {
				cur[j] = max(prev[j], cur[j-1])
			}
		}
		prev, cur = cur, prev
	}
	return 2 * float64(prev[len(b)]) / float64(len(a)+len(b))
}
