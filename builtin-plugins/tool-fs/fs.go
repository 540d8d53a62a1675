package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
	"github.com/fluffy-waffle/fluffy/pluginsdk/toolpath"
)

const (
	defaultReadLines = 2000      // lines fs.read returns unless asked otherwise
	maxReadLines     = 10000     // the most lines one fs.read returns
	maxLineChars     = 2000      // longer lines are clipped in fs.read's output
	maxReadOutput    = 256 << 10 // bytes of numbered text one fs.read returns
	maxReadFile      = 64 << 20  // files beyond this are not hashed whole
	binarySniff      = 8 << 10   // bytes looked at to tell binary from text
	maxWriteBytes    = 16 << 20  // largest content fs.write accepts
	maxListEntries   = 5000
)

func newToolSet(logger hclog.Logger) *pluginsdk.ToolSet {
	return &pluginsdk.ToolSet{
		Name:    "tool-fs",
		Version: version,
		Logger:  logger,
		Specs: []pluginsdk.ToolSpec{
			{Def: tool.Def{Name: "fs.read", Summary: summaryRead, Parameters: json.RawMessage(schemaRead), OutputMode: tool.OutputFull}, Handler: fsRead},
			{Def: tool.Def{Name: "fs.list", Summary: "List a project directory", Parameters: json.RawMessage(schemaList), OutputMode: tool.OutputFull}, Handler: fsList},
			{Def: tool.Def{Name: "fs.exists", Summary: "Tell whether a project path exists and what it is", Parameters: json.RawMessage(schemaExists), OutputMode: tool.OutputFull}, Handler: fsExists},
			{Def: tool.Def{Name: "fs.write", Summary: summaryWrite, Parameters: json.RawMessage(schemaWrite), OutputMode: tool.OutputPatch}, Handler: fsWrite},
			{Def: tool.Def{Name: "fs.edit", Summary: summaryEdit, Parameters: json.RawMessage(schemaEdit), OutputMode: tool.OutputPatch}, Handler: fsEdit},
			{Def: tool.Def{Name: "fs.apply_patch", Summary: summaryPatch, Parameters: json.RawMessage(schemaPatch), OutputMode: tool.OutputPatch}, Handler: fsApplyPatch},
		},
	}
}

// The summaries and schemas must match plugin.yaml (the kernel shows the
// manifest's to the model; TestManifestMatchesToolSet checks they agree).
const (
	summaryRead  = "Read a text file as numbered lines (cat -n style); offset and limit select a line range"
	summaryWrite = "Create a file or replace its whole content (delivered as a patch for review); prefer fs.edit to change part of a file"
	summaryEdit  = "Replace an exact string in a file (whitespace included); several replacements at once with edits, all or nothing"
	summaryPatch = "Apply a multi-file patch: the *** Begin Patch envelope (Add/Update/Delete File, Move to) or a unified diff; all or nothing"

	schemaRead   = `{"type":"object","properties":{"path":{"type":"string","minLength":1,"description":"File to read, relative to the project root (e.g. src/main.go)"},"offset":{"type":"integer","minimum":0,"description":"First line to return, counting from 1 (0 or absent: the first line). Use the next_offset of a previous read to continue"},"limit":{"type":"integer","minimum":1,"description":"Most lines to return (default 2000, at most 10000)"}},"required":["path"],"additionalProperties":false}`
	schemaList   = `{"type":"object","properties":{"path":{"type":"string","description":"Directory to list, relative to the project root (absent or \".\": the root)"},"recursive":{"type":"boolean","description":"List every level below the directory (.git is not entered)"}},"additionalProperties":false}`
	schemaExists = `{"type":"object","properties":{"path":{"type":"string","minLength":1,"description":"Path to check, relative to the project root"}},"required":["path"],"additionalProperties":false}`
	schemaWrite  = `{"type":"object","properties":{"path":{"type":"string","minLength":1,"description":"File to create or replace, relative to the project root"},"content":{"type":"string","description":"The complete new content of the file"},"expected_sha256":{"type":"string","description":"The sha256 fs.read returned; the write is refused (STALE_FILE) if the file changed since"},"delete":{"type":"boolean","description":"Delete the file instead (content must be absent)"}},"required":["path"],"additionalProperties":false}`
	schemaEdit   = `{"type":"object","properties":{"path":{"type":"string","minLength":1,"description":"File to edit, relative to the project root; it must exist"},"old_string":{"type":"string","description":"Exact text to replace, whitespace and indentation included, without fs.read's line-number prefixes; it must occur exactly once unless replace_all is set"},"new_string":{"type":"string","description":"Text that replaces old_string (empty: delete it)"},"replace_all":{"type":"boolean","description":"Replace every occurrence of old_string instead of requiring exactly one"},"edits":{"type":"array","minItems":1,"description":"Several replacements applied in order to the same file, all or nothing (instead of old_string/new_string)","items":{"type":"object","properties":{"old_string":{"type":"string","description":"Exact text to replace"},"new_string":{"type":"string","description":"Replacement text"},"replace_all":{"type":"boolean","description":"Replace every occurrence"}},"required":["old_string","new_string"],"additionalProperties":false}},"expected_sha256":{"type":"string","description":"The sha256 fs.read returned; the edit is refused (STALE_FILE) if the file changed since"}},"required":["path"],"additionalProperties":false}`
	schemaPatch  = `{"type":"object","properties":{"patch":{"type":"string","minLength":1,"description":"The patch text: either '*** Begin Patch' ... '*** End Patch' with '*** Add File: P' (+ lines), '*** Update File: P' (optional '*** Move to: Q', then '@@' hunks of ' ' context, '-' removed and '+' added lines), '*** Delete File: P'; or a unified diff ('--- a/P', '+++ b/P', '@@ -l,n +l,n @@'). Paths are relative to the project root; every file must apply or nothing changes"}},"required":["patch"],"additionalProperties":false}`
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

type readArgs struct {
	Path   string `json:"path"`
	Offset int    `json:"offset"`
	Limit  int    `json:"limit"`
}

type readResult struct {
	Path string `json:"path"`
	// Content is the selected lines, each "<number>\t<text>\n" with the
	// number right-aligned (cat -n).
	Content string `json:"content"`
	// SHA256 is the hash of the whole file, whatever range was read.
	SHA256     string `json:"sha256,omitempty"`
	Size       int64  `json:"size"`
	TotalLines int    `json:"total_lines"`
	StartLine  int    `json:"start_line"`
	EndLine    int    `json:"end_line"`
	// More tells that lines follow EndLine; NextOffset is the offset that
	// reads them.
	More       bool `json:"more"`
	NextOffset int  `json:"next_offset,omitempty"`
	// ClippedLines counts lines longer than maxLineChars, shown clipped.
	ClippedLines int `json:"clipped_lines,omitempty"`
	// Truncated is More under its old name.
	Truncated bool `json:"truncated"`
}

func fsRead(_ context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a readArgs
	if err := pluginsdk.DecodeArgs("fs.read", raw, &a); err != nil {
		return nil, err
	}
	if a.Offset < 0 || a.Limit < 0 {
		return nil, uerr.New("TOOL_ARGS_INVALID", "offset and limit cannot be negative", "they count lines from 1", `send e.g. {"path": "a.go", "offset": 100, "limit": 50}`)
	}
	rel, err := toolpath.Clean(a.Path)
	if err != nil {
		return nil, err
	}
	root, err := toolpath.OpenRoot("tool-fs", tc.Workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return nil, toolpath.Err(rel, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, toolpath.Err(rel, err)
	}
	if st.IsDir() {
		return nil, uerr.New("FS_IS_DIR", fmt.Sprintf("%s is a directory", rel), "fs.read reads files", "use fs.list for directories")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadFile+1))
	if err != nil {
		return nil, toolpath.Err(rel, err)
	}
	whole := len(data) <= maxReadFile
	if !whole {
		data = data[:maxReadFile]
	}
	if why := binaryReason(data); why != "" {
		return nil, uerr.New("FS_BINARY", fmt.Sprintf("%s is not a text file", rel), why,
			"fs.read shows text only; use fs.exists or fs.list to see its size, or a tool that understands the format")
	}
	limit := a.Limit
	if limit == 0 {
		limit = defaultReadLines
	}
	limit = min(limit, maxReadLines)
	start := max(a.Offset, 1)
	res := readResult{Path: rel, Size: st.Size(), StartLine: start}
	if whole {
		res.SHA256 = sum(data)
	}
	res.Content, res.EndLine, res.TotalLines, res.ClippedLines = numberLines(data, start, limit)
	if !whole {
		res.TotalLines = 0 // unknown: only the first maxReadFile bytes were read
	}
	if res.EndLine < res.StartLine {
		res.EndLine = res.StartLine - 1
		if res.StartLine > res.TotalLines+1 && whole {
			return nil, uerr.New("FS_RANGE", fmt.Sprintf("%s has %d lines; offset %d is past its end", rel, res.TotalLines, a.Offset),
				"offset counts lines from 1", fmt.Sprintf("read from an offset between 1 and %d", max(res.TotalLines, 1)))
		}
	}
	if res.EndLine < res.TotalLines || !whole {
		res.More, res.NextOffset = true, res.EndLine+1
	}
	res.Truncated = res.More
	return res, nil
}

// numberLines formats lines start..start+limit-1 of data cat -n style. It
// also counts the file's lines (a last line without newline counts).
func numberLines(data []byte, start, limit int) (out string, end, total, clipped int) {
	var b strings.Builder
	n := 0
	for len(data) > 0 {
		n++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if n < start || n >= start+limit || b.Len() >= maxReadOutput {
			continue
		}
		text := strings.TrimSuffix(string(line), "\r")
		if len(text) > maxLineChars {
			cut := maxLineChars
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			text = fmt.Sprintf("%s… [line clipped: %d of %d bytes shown]", text[:cut], cut, len(text))
			clipped++
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, text)
		end = n
	}
	return b.String(), end, n, clipped
}

// binaryReason tells why data is not text ("" when it is): a NUL byte in
// its first binarySniff bytes, or mostly invalid UTF-8 there.
func binaryReason(data []byte) string {
	head := data[:min(len(data), binarySniff)]
	if i := bytes.IndexByte(head, 0); i >= 0 {
		return fmt.Sprintf("it has a NUL byte at offset %d", i)
	}
	if utf8.Valid(head) {
		return ""
	}
	bad := 0
	for i := 0; i < len(head); {
		r, sz := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && sz == 1 && len(head)-i >= utf8.UTFMax {
			bad++
		}
		i += sz
	}
	if bad*10 > len(head) {
		return fmt.Sprintf("%d of its first %d bytes are not UTF-8", bad, len(head))
	}
	return ""
}

type listEntry struct {
	Path string `json:"path"`
	Type string `json:"type"` // file | dir | symlink | other
	Size int64  `json:"size"`
}

func entryType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	}
	return "other"
}

func fsList(_ context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if err := pluginsdk.DecodeArgs("fs.list", raw, &a); err != nil {
		return nil, err
	}
	rel, err := toolpath.Clean(a.Path)
	if err != nil {
		return nil, err
	}
	root, err := toolpath.OpenRoot("tool-fs", tc.Workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	st, err := root.Stat(rel)
	if err != nil {
		return nil, toolpath.Err(rel, err)
	}
	if !st.IsDir() {
		return nil, uerr.New("FS_NOT_DIR", fmt.Sprintf("%s is not a directory", rel), "fs.list lists directories", "use fs.read for files")
	}
	var out []listEntry
	truncated := false
	walkErr := fs.WalkDir(root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == rel {
			return nil
		}
		if len(out) >= maxListEntries {
			truncated = true
			return fs.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, listEntry{Path: p, Type: entryType(info.Mode()), Size: info.Size()})
		if d.IsDir() && (!a.Recursive || d.Name() == ".git") {
			return fs.SkipDir
		}
		return nil
	})
	if walkErr != nil {
		return nil, toolpath.Err(rel, walkErr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return map[string]any{"path": rel, "entries": out, "truncated": truncated}, nil
}

func fsExists(_ context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := pluginsdk.DecodeArgs("fs.exists", raw, &a); err != nil {
		return nil, err
	}
	rel, err := toolpath.Clean(a.Path)
	if err != nil {
		return nil, err
	}
	root, err := toolpath.OpenRoot("tool-fs", tc.Workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	st, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{"path": rel, "exists": false}, nil
	}
	if err != nil {
		return nil, toolpath.Err(rel, err)
	}
	if st.Mode()&fs.ModeSymlink != 0 {
		// A symlink "exists" only if it resolves inside the root.
		if _, err := root.Stat(rel); err != nil {
			return nil, toolpath.Err(rel, err)
		}
	}
	return map[string]any{"path": rel, "exists": true, "type": entryType(st.Mode())}, nil
}

type writeArgs struct {
	Path           string  `json:"path"`
	Content        *string `json:"content"`
	ExpectedSHA256 string  `json:"expected_sha256"`
	Delete         bool    `json:"delete"`
}

// fsWrite computes the change against the read-only workspace and leaves it
// in <out>/<operation>/. The project itself is never written.
func fsWrite(_ context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a writeArgs
	if err := pluginsdk.DecodeArgs("fs.write", raw, &a); err != nil {
		return nil, err
	}
	if a.Content == nil && !a.Delete {
		return nil, uerr.New("TOOL_ARGS_INVALID", "fs.write needs content or delete", "neither field was set", `send {"path": ..., "content": "..."} or {"path": ..., "delete": true}`)
	}
	if a.Content != nil && len(*a.Content) > maxWriteBytes {
		return nil, uerr.New("FS_TOO_LARGE", fmt.Sprintf("content for %s is %d bytes", a.Path, len(*a.Content)), fmt.Sprintf("fs.write accepts at most %d bytes", maxWriteBytes), "split the file or write it in parts")
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
	if err := cur.expect(a.ExpectedSHA256); err != nil {
		return nil, err
	}
	ch := change{file: cur, delete: a.Delete}
	if a.Delete {
		if !cur.exists {
			return nil, uerr.New("FS_NOT_FOUND", fmt.Sprintf("%s does not exist", cur.rel), "there is nothing to delete", "check the path with fs.exists")
		}
	} else {
		ch.content = []byte(*a.Content)
	}
	out, err := w.emit([]change{ch})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// writer proposes changes: it reads the current files from the read-only
// workspace and leaves each change as an artifact in the call's output
// directory, recorded with tc.AddChange.
type writer struct {
	tc   *pluginsdk.ToolContext
	root *confine.Root
}

func openWriter(tc *pluginsdk.ToolContext) (*writer, error) {
	if tc.Workspace == "" {
		return nil, uerr.New("FS_NOT_CONFIGURED", "tool-fs has no workspace", "the kernel did not send a workspace in Configure", "this is a kernel bug; report it")
	}
	root, err := confine.OpenRoot(tc.Workspace)
	if err != nil {
		return nil, err
	}
	return &writer{tc: tc, root: root}, nil
}

func (w *writer) Close() { w.root.Close() }

// file is a project file as a write finds it.
type file struct {
	rel    string
	old    []byte
	exists bool
	hash   string // "" when absent
}

// expect refuses a change written against other content than the file's.
func (f file) expect(sha string) error {
	if sha != "" && sha != f.hash {
		return uerr.New("STALE_FILE", fmt.Sprintf("%s changed since it was read", f.rel),
			fmt.Sprintf("expected content hash %s, the project now has %s", short(sha), short(f.hash)),
			"read the file again and redo the edit on its current content")
	}
	return nil
}

// load confines p for writing and reads what is there now.
func (w *writer) load(p string) (file, error) {
	// Never the root, .fluffy/ or a .git/ directory (FS_PATH_RESERVED).
	rel, err := confine.Writable(p)
	if err != nil {
		return file{}, err
	}
	// A parent that escapes through a symlink is an escape; one that stays
	// inside is refused all the same: a write changes exactly the file it
	// names (FS_PATH_SYMLINK).
	if dir := path.Dir(rel); dir != "." {
		if _, perr := w.root.OS().Stat(dir); perr != nil && !errors.Is(perr, fs.ErrNotExist) {
			return file{}, toolpath.Err(rel, perr)
		}
	}
	if err := w.root.NoLinks(rel); err != nil {
		return file{}, err
	}
	old, err := w.root.OS().ReadFile(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return file{rel: rel}, nil
	}
	if err != nil {
		return file{}, toolpath.Err(rel, err)
	}
	return file{rel: rel, old: old, exists: true, hash: sum(old)}, nil
}

// change is one proposed change of a file.
type change struct {
	file
	content []byte
	delete  bool
	// extra joins the change's result (e.g. what fs.edit normalised).
	extra map[string]any
}

// emit writes every change's artifact and records it; the changes are
// checked before emit, so a call proposes all of them or none.
func (w *writer) emit(chs []change) ([]map[string]any, error) {
	tc := w.tc
	if tc.OutDir == "" {
		return nil, uerr.New("FS_NOT_CONFIGURED", "tool-fs has no output directory", "the kernel did not send out_dir in Configure", "this is a kernel bug; report it")
	}
	op := tc.Call.OperationID
	if op == "" {
		op = tc.Call.ID
	}
	if confine.Name(op) != nil {
		return nil, uerr.New("TOOL_ARGS_INVALID", fmt.Sprintf("operation id %q is not usable as a directory name", op), "the kernel must send a plain operation id", "this is a kernel bug; report it")
	}
	opDir := filepath.Join(tc.OutDir, op)
	if err := os.MkdirAll(opDir, 0o755); err != nil {
		return nil, fmt.Errorf("create output dir: %w", err)
	}
	type pending struct {
		fc   tool.FileChange
		name string
		data []byte
		res  map[string]any
	}
	var ps []pending
	n := len(entriesIn(opDir))
	for i, c := range chs {
		fc := tool.FileChange{Path: c.rel, SHA256Before: c.hash, Delete: c.delete}
		if !c.delete {
			fc.SHA256After = sum(c.content)
		}
		name := fmt.Sprintf("%03d-%s", n+i, strings.ReplaceAll(c.rel, "/", "__"))
		mode := tool.OutputPatch
		var data []byte
		added, removed := 0, 0
		if !c.delete {
			if d, err := patch.Unified(c.rel, c.old, c.content); err == nil {
				data = []byte(d)
				name += ".patch"
				added, removed = patch.Stats(d)
			} else {
				mode, data = tool.OutputFull, c.content
				name += ".full"
			}
			fc.Mode, fc.Artifact = mode, path.Join(op, name)
		} else {
			fc.Mode = mode
			_, removed = patch.Stats(mustUnified(c.rel, c.old))
		}
		res := map[string]any{"path": c.rel, "mode": mode, "sha256_before": c.hash, "sha256_after": fc.SHA256After, "lines_added": added, "lines_removed": removed, "created": !c.exists}
		if c.delete {
			res["deleted"] = true
		} else {
			res["artifact"] = fc.Artifact
		}
		for k, v := range c.extra {
			res[k] = v
		}
		ps = append(ps, pending{fc, name, data, res})
	}
	for _, p := range ps {
		if p.fc.Delete {
			continue
		}
		if err := os.WriteFile(filepath.Join(opDir, p.name), p.data, 0o644); err != nil {
			return nil, fmt.Errorf("write artifact: %w", err)
		}
	}
	out := make([]map[string]any, len(ps))
	for i, p := range ps {
		tc.AddChange(p.fc)
		out[i] = p.res
	}
	return out, nil
}

// mustUnified is the diff that deletes old, "" when it is too large.
func mustUnified(rel string, old []byte) string {
	d, _ := patch.Unified(rel, old, nil)
	return d
}

func entriesIn(dir string) []os.DirEntry {
	es, _ := os.ReadDir(dir)
	return es
}

func short(s string) string {
	if s == "" {
		return "(none: file absent)"
	}
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
