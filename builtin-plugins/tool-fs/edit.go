package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

// Error codes of fs.edit the model branches on.
const (
	CodeEditNotFound  = "FS_EDIT_NOT_FOUND"
	CodeEditAmbiguous = "FS_EDIT_AMBIGUOUS"
	CodeEditNoop      = "FS_EDIT_NOOP"
)

type editOp struct {
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

type editArgs struct {
	Path           string   `json:"path"`
	OldString      *string  `json:"old_string"`
	NewString      *string  `json:"new_string"`
	ReplaceAll     bool     `json:"replace_all"`
	Edits          []editOp `json:"edits"`
	ExpectedSHA256 string   `json:"expected_sha256"`
}

// fsEdit replaces exact strings in one file and proposes the result the
// way fs.write does. Every replacement must apply, or nothing is proposed.
func fsEdit(_ context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a editArgs
	if err := pluginsdk.DecodeArgs("fs.edit", raw, &a); err != nil {
		return nil, err
	}
	ops := a.Edits
	switch {
	case len(ops) > 0 && (a.OldString != nil || a.NewString != nil):
		return nil, uerr.New("TOOL_ARGS_INVALID", "fs.edit got both edits and old_string/new_string", "one call is either one replacement or a list of them",
			`send {"path": P, "old_string": A, "new_string": B} or {"path": P, "edits": [{"old_string": A, "new_string": B}, ...]}`)
	case len(ops) == 0:
		if a.OldString == nil || a.NewString == nil {
			return nil, uerr.New("TOOL_ARGS_INVALID", "fs.edit needs old_string and new_string (or edits)", "a replacement names the text to replace and its replacement",
				`send {"path": P, "old_string": "exact text", "new_string": "replacement"}; to create a file use fs.write`)
		}
		ops = []editOp{{OldString: *a.OldString, NewString: *a.NewString, ReplaceAll: a.ReplaceAll}}
	}
	w, err := openWriter(tc)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	cur, err := w.load(a.Path)
	if err != nil {
		return nil, err
	}
	if !cur.exists {
		return nil, uerr.New("FS_NOT_FOUND", fmt.Sprintf("%s does not exist", cur.rel), "fs.edit changes an existing file",
			"create the file with fs.write, or check the path with fs.list")
	}
	if err := cur.expect(a.ExpectedSHA256); err != nil {
		return nil, err
	}
	if why := binaryReason(cur.old); why != "" {
		return nil, uerr.New("FS_BINARY", fmt.Sprintf("%s is not a text file", cur.rel), why, "fs.edit changes text files only")
	}
	content := string(cur.old)
	var notes []string
	replaced := 0
	for i, op := range ops {
		which := ""
		if len(ops) > 1 {
			which = fmt.Sprintf("edits[%d]: ", i)
		}
		next, n, note, err := replace(cur.rel, content, op, which)
		if err != nil {
			if len(ops) > 1 {
				err.Why += "; nothing was proposed: the edits of one call apply together or not at all"
			}
			return nil, err
		}
		content, replaced = next, replaced+n
		if note != "" {
			notes = append(notes, which+note)
		}
	}
	if content == string(cur.old) {
		return nil, uerr.New(CodeEditNoop, fmt.Sprintf("the edit leaves %s unchanged", cur.rel), "new_string equals old_string", "send the replacement you mean, or skip the edit")
	}
	if len(content) > maxWriteBytes {
		return nil, uerr.New("FS_TOO_LARGE", fmt.Sprintf("%s would be %d bytes", cur.rel, len(content)), fmt.Sprintf("tool-fs proposes at most %d bytes per file", maxWriteBytes), "split the file")
	}
	ch := change{file: cur, content: []byte(content), extra: map[string]any{"replacements": replaced}}
	if len(notes) > 0 {
		ch.extra["normalized"] = notes
	}
	out, err := w.emit([]change{ch})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

var lineNumberPrefix = regexp.MustCompile(`^\s*\d+\t`)

// replace applies one replacement to content. It returns the new content,
// how many places changed, and a note when the match needed normalising.
func replace(rel, content string, op editOp, which string) (string, int, string, *uerr.Error) {
	if op.OldString == "" {
		return "", 0, "", uerr.New("TOOL_ARGS_INVALID", which+"old_string is empty", "fs.edit replaces existing text",
			"send the exact text to replace; to create or rewrite a whole file use fs.write")
	}
	if op.OldString == op.NewString {
		return "", 0, "", uerr.New(CodeEditNoop, which+"old_string and new_string are the same", "the edit would change nothing", "send the replacement you mean")
	}
	n := strings.Count(content, op.OldString)
	switch {
	case n == 1 || (n > 1 && op.ReplaceAll):
		return strings.ReplaceAll(content, op.OldString, op.NewString), n, "", nil
	case n > 1:
		lines := occurrenceLines(content, op.OldString)
		return "", 0, "", uerr.New(CodeEditAmbiguous,
			fmt.Sprintf("%sold_string occurs %d times in %s (at lines %s)", which, n, rel, joinInts(lines, 10)),
			"fs.edit replaces exactly one occurrence unless replace_all is true",
			"add surrounding lines to old_string so it occurs once (fs.read those lines to copy them), or set replace_all: true to change every occurrence")
	}
	// Absent. In a file with CRLF line ends, text sent with LF ends is the
	// same text: match and replace it with the file's line ends.
	if strings.Contains(content, "\r\n") && strings.Contains(op.OldString, "\n") && !strings.Contains(op.OldString, "\r") {
		crlf := editOp{OldString: toCRLF(op.OldString), NewString: toCRLF(op.NewString), ReplaceAll: op.ReplaceAll}
		if next, n, _, err := replace(rel, content, crlf, which); err == nil {
			return next, n, "old_string matched with the file's CRLF line ends", nil
		} else if err.Code == CodeEditAmbiguous {
			return "", 0, "", err
		}
	}
	// A unique match once trailing whitespace is ignored on every line is
	// the same text to a reader: apply it, and say so.
	if start, end, ok := looseMatch(content, op.OldString, trimTrailing); ok {
		return content[:start] + op.NewString + content[end:], 1, "old_string matched only with trailing whitespace ignored", nil
	}
	lines := strings.Split(content, "\n")
	e := uerr.New(CodeEditNotFound, fmt.Sprintf("%sold_string is not in %s", which, rel),
		"no exact match (whitespace and indentation count)", "")
	var fix strings.Builder
	if allPrefixed(op.OldString) {
		fix.WriteString("old_string starts its lines with fs.read's line-number prefixes; send the text without them. ")
	}
	if start, _, ok := looseMatch(content, op.OldString, strings.TrimSpace); ok {
		ln := strings.Count(content[:start], "\n") + 1
		e.Why += fmt.Sprintf("; it matches at line %d only if indentation is ignored", ln)
		fmt.Fprintf(&fix, "copy the lines with the file's own indentation: %s", excerpt(lines, ln-1, len(strings.Split(strings.TrimSuffix(op.OldString, "\n"), "\n"))))
	} else if i := patch.Closest(lines, firstLine(op.OldString)); i >= 0 {
		fmt.Fprintf(&fix, "the closest line is %d; the file there reads: %s. Copy old_string from it exactly (or fs.read the file again)", i+1, excerpt(lines, max(i-1, 0), 3))
	} else {
		fix.WriteString("fs.read the file again and copy old_string from its current content")
	}
	e.Fix = fix.String()
	return "", 0, "", e
}

func toCRLF(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

func trimTrailing(s string) string { return strings.TrimRight(s, " \t\r") }

// looseMatch finds the whole lines of content that equal want's lines
// under norm, when exactly one such run exists. It returns the byte range
// (without the run's final newline, unless want ends with one).
func looseMatch(content, want string, norm func(string) string) (int, int, bool) {
	wl := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	for i := range wl {
		wl[i] = norm(wl[i])
	}
	cl := strings.Split(content, "\n")
	offs := make([]int, len(cl)+1)
	for i, l := range cl {
		offs[i+1] = offs[i] + len(l) + 1
	}
	found, at := 0, -1
	for i := 0; i+len(wl) <= len(cl); i++ {
		ok := true
		for k := range wl {
			if norm(cl[i+k]) != wl[k] {
				ok = false
				break
			}
		}
		if ok {
			found++
			at = i
		}
	}
	if found != 1 {
		return 0, 0, false
	}
	end := offs[at+len(wl)] - 1 // before the last line's newline
	if strings.HasSuffix(want, "\n") {
		end = min(end+1, len(content))
	}
	return offs[at], end, true
}

func occurrenceLines(content, s string) []int {
	var out []int
	from := 0
	for {
		i := strings.Index(content[from:], s)
		if i < 0 {
			return out
		}
		out = append(out, strings.Count(content[:from+i], "\n")+1)
		from += i + max(len(s), 1)
	}
}

func joinInts(xs []int, most int) string {
	var b strings.Builder
	for i, x := range xs {
		if i == most {
			fmt.Fprintf(&b, ", … (%d more)", len(xs)-most)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, x)
	}
	return b.String()
}

// excerpt shows n lines from index i on one line (the error crosses the
// plugin boundary, which escapes newlines): line numbers as fs.read counts
// them, the text quoted so tabs and spaces are visible.
func excerpt(lines []string, i, n int) string {
	var parts []string
	for k := i; k < len(lines) && k < i+max(n, 1) && k < i+8; k++ {
		t := lines[k]
		if len(t) > 200 {
			t = t[:200] + "…"
		}
		parts = append(parts, fmt.Sprintf("line %d: %q", k+1, t))
	}
	return strings.Join(parts, "; ")
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			return l
		}
	}
	return s
}

func allPrefixed(s string) bool {
	any := false
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if !lineNumberPrefix.MatchString(l) {
			return false
		}
		any = true
	}
	return any
}
