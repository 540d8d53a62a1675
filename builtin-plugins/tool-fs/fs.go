package main

import (
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

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/confine"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
	"github.com/fluffy-waffle/fluffy/pluginsdk/patch"
	"github.com/fluffy-waffle/fluffy/pluginsdk/toolpath"
	"github.com/fluffy-waffle/fluffy/uerr"
)

const (
	defaultReadLimit = 1 << 20  // bytes returned by fs.read unless asked otherwise
	maxReadLimit     = 8 << 20  // hard cap
	maxWriteBytes    = 16 << 20 // largest content fs.write accepts
	maxListEntries   = 5000
)

func newToolSet(logger hclog.Logger) *pluginsdk.ToolSet {
	return &pluginsdk.ToolSet{
		Name:    "tool-fs",
		Version: version,
		Logger:  logger,
		Specs: []pluginsdk.ToolSpec{
			{Def: tool.Def{Name: "fs.read", Summary: "Read a project file (text), optionally a line range", Parameters: json.RawMessage(schemaRead), OutputMode: tool.OutputFull}, Handler: fsRead},
			{Def: tool.Def{Name: "fs.list", Summary: "List a project directory", Parameters: json.RawMessage(schemaList), OutputMode: tool.OutputFull}, Handler: fsList},
			{Def: tool.Def{Name: "fs.exists", Summary: "Tell whether a project path exists and what it is", Parameters: json.RawMessage(schemaExists), OutputMode: tool.OutputFull}, Handler: fsExists},
			{Def: tool.Def{Name: "fs.write", Summary: "Propose new content for a project file (delivered as a patch for review)", Parameters: json.RawMessage(schemaWrite), OutputMode: tool.OutputPatch}, Handler: fsWrite},
		},
	}
}

const (
	schemaRead   = `{"type":"object","properties":{"path":{"type":"string","minLength":1},"offset":{"type":"integer","minimum":0},"limit":{"type":"integer","minimum":1}},"required":["path"],"additionalProperties":false}`
	schemaList   = `{"type":"object","properties":{"path":{"type":"string"},"recursive":{"type":"boolean"}},"additionalProperties":false}`
	schemaExists = `{"type":"object","properties":{"path":{"type":"string","minLength":1}},"required":["path"],"additionalProperties":false}`
	schemaWrite  = `{"type":"object","properties":{"path":{"type":"string","minLength":1},"content":{"type":"string"},"expected_sha256":{"type":"string"},"delete":{"type":"boolean"}},"required":["path"],"additionalProperties":false}`
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
	Path      string `json:"path"`
	Content   string `json:"content"`
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	Truncated bool   `json:"truncated"`
}

func fsRead(_ context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a readArgs
	if err := pluginsdk.DecodeArgs("fs.read", raw, &a); err != nil {
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
	limit := a.Limit
	if limit <= 0 {
		limit = defaultReadLimit
	}
	limit = min(limit, maxReadLimit)
	if a.Offset > 0 {
		if _, err := f.Seek(int64(a.Offset), io.SeekStart); err != nil {
			return nil, toolpath.Err(rel, err)
		}
	}
	buf, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, toolpath.Err(rel, err)
	}
	res := readResult{Path: rel, Size: st.Size()}
	if len(buf) > limit {
		buf, res.Truncated = buf[:limit], true
	}
	res.Content = string(buf)
	if a.Offset == 0 && !res.Truncated {
		res.SHA256 = sum(buf)
	}
	return res, nil
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
	// Never the root, .fluffy/ or a .git/ directory (FS_PATH_RESERVED).
	rel, err := confine.Writable(a.Path)
	if err != nil {
		return nil, err
	}
	if tc.Workspace == "" {
		return nil, uerr.New("FS_NOT_CONFIGURED", "tool-fs has no workspace", "the kernel did not send a workspace in Configure", "this is a kernel bug; report it")
	}
	root, err := confine.OpenRoot(tc.Workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// A parent that escapes through a symlink is an escape; one that stays
	// inside is refused all the same: a write changes exactly the file it
	// names (FS_PATH_SYMLINK).
	if dir := path.Dir(rel); dir != "." {
		if _, perr := root.OS().Stat(dir); perr != nil && !errors.Is(perr, fs.ErrNotExist) {
			return nil, toolpath.Err(rel, perr)
		}
	}
	if err := root.NoLinks(rel); err != nil {
		return nil, err
	}
	old, err := root.OS().ReadFile(rel)
	exists := true
	if errors.Is(err, fs.ErrNotExist) {
		old, exists = nil, false
	} else if err != nil {
		return nil, toolpath.Err(rel, err)
	}
	before := ""
	if exists {
		before = sum(old)
	}
	if a.ExpectedSHA256 != "" && a.ExpectedSHA256 != before {
		return nil, uerr.New("STALE_FILE", fmt.Sprintf("%s changed since it was read", rel),
			fmt.Sprintf("expected content hash %s, the project now has %s", short(a.ExpectedSHA256), short(before)),
			"read the file again and redo the edit on its current content")
	}
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
	ch := tool.FileChange{Path: rel, SHA256Before: before}
	var newContent []byte
	if a.Delete {
		if !exists {
			return nil, uerr.New("FS_NOT_FOUND", fmt.Sprintf("%s does not exist", rel), "there is nothing to delete", "check the path with fs.exists")
		}
		ch.Delete = true
	} else {
		newContent = []byte(*a.Content)
		ch.SHA256After = sum(newContent)
	}
	artifactBase := fmt.Sprintf("%03d-%s", len(entriesIn(opDir)), strings.ReplaceAll(rel, "/", "__"))
	mode := tool.OutputPatch
	var data []byte
	if d, err := patch.Unified(rel, old, newContent); err == nil {
		data = []byte(d)
		artifactBase += ".patch"
	} else {
		mode = tool.OutputFull
		data = newContent
		artifactBase += ".full"
	}
	ch.Mode = mode
	ch.Artifact = path.Join(op, artifactBase)
	if err := os.WriteFile(filepath.Join(opDir, artifactBase), data, 0o644); err != nil {
		return nil, fmt.Errorf("write artifact: %w", err)
	}
	tc.AddChange(ch)
	added, removed := 0, 0
	if mode == tool.OutputPatch {
		added, removed = patch.Stats(string(data))
	}
	return map[string]any{"path": rel, "mode": mode, "artifact": ch.Artifact, "sha256_before": before, "sha256_after": ch.SHA256After, "lines_added": added, "lines_removed": removed, "created": !exists}, nil
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
