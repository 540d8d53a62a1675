package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
)

// Error codes of fs.apply_patch.
const (
	CodePatchInvalid  = "FS_PATCH_INVALID"
	CodePatchConflict = "FS_PATCH_CONFLICT"
)

// fsApplyPatch applies a multi-file patch against the read-only workspace
// and proposes every file it touches, or none when one does not apply.
func fsApplyPatch(_ context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a struct {
		Patch string `json:"patch"`
	}
	if err := pluginsdk.DecodeArgs("fs.apply_patch", raw, &a); err != nil {
		return nil, err
	}
	fps, err := patch.ParseMulti(a.Patch)
	if err != nil {
		return nil, uerr.Wrap(err, CodePatchInvalid, "the patch cannot be parsed", err.Error(),
			"send '*** Begin Patch', then '*** Update File: PATH' with '@@' hunks (' ' context, '-' removed, '+' added lines), and '*** End Patch'; or a unified diff with '--- a/PATH' and '+++ b/PATH' headers")
	}
	w, err := openWriter(tc)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	var chs []change
	for _, fp := range fps {
		cur, err := w.load(fp.Path)
		if err != nil {
			return nil, err
		}
		switch fp.Op {
		case patch.OpAdd:
			if cur.exists {
				return nil, uerr.New(CodePatchConflict, fmt.Sprintf("%s already exists", cur.rel), "*** Add File creates a new file",
					"use *** Update File with hunks to change it (fs.read it first), or fs.write to replace it whole")
			}
			chs = append(chs, change{file: cur, content: []byte(fp.Added), extra: map[string]any{"op": "add"}})
		case patch.OpDelete:
			if !cur.exists {
				return nil, uerr.New(CodePatchConflict, fmt.Sprintf("%s does not exist", cur.rel), "there is nothing to delete", "check the path with fs.list")
			}
			chs = append(chs, change{file: cur, delete: true, extra: map[string]any{"op": "delete"}})
		case patch.OpUpdate:
			if !cur.exists {
				return nil, uerr.New(CodePatchConflict, fmt.Sprintf("%s does not exist", cur.rel), "*** Update File changes an existing file",
					"use *** Add File to create it, or check the path with fs.list")
			}
			if why := binaryReason(cur.old); why != "" {
				return nil, uerr.New("FS_BINARY", fmt.Sprintf("%s is not a text file", cur.rel), why, "fs.apply_patch changes text files only")
			}
			content, normalized, err := patch.ApplyHunks(cur.rel, cur.old, fp.Hunks)
			if err != nil {
				var he *patch.HunkError
				var ae *patch.AmbiguousError
				fix := "fs.read the file again and copy the hunk's context and removed lines exactly"
				switch {
				case errors.As(err, &he) && he.Near > 0:
					fix = fmt.Sprintf("the file's line %d reads %q; fs.read around it and copy the context exactly", he.Near, strings.TrimSpace(he.NearText))
				case errors.As(err, &ae):
					fix = "add context lines that occur only at the place you mean, or an '@@ LINE' anchor naming a line before it (e.g. the function's header)"
				}
				return nil, uerr.Wrap(err, CodePatchConflict, fmt.Sprintf("the patch does not apply to %s; nothing was changed", cur.rel), err.Error(), fix)
			}
			extra := map[string]any{"op": "update"}
			if normalized {
				extra["normalized"] = "a hunk matched only with trailing whitespace ignored"
			}
			if fp.MoveTo == "" {
				chs = append(chs, change{file: cur, content: content, extra: extra})
				continue
			}
			dst, err := w.load(fp.MoveTo)
			if err != nil {
				return nil, err
			}
			if dst.exists {
				return nil, uerr.New(CodePatchConflict, fmt.Sprintf("cannot move %s to %s: it exists", cur.rel, dst.rel), "*** Move to names a new path",
					"move to a path that does not exist, or delete it in the same patch first")
			}
			extra["op"], extra["moved_from"] = "move", cur.rel
			chs = append(chs, change{file: cur, delete: true, extra: map[string]any{"op": "move", "moved_to": dst.rel}},
				change{file: dst, content: content, extra: extra})
		}
	}
	for _, c := range chs {
		if len(c.content) > maxWriteBytes {
			return nil, uerr.New("FS_TOO_LARGE", fmt.Sprintf("%s would be %d bytes", c.rel, len(c.content)), fmt.Sprintf("tool-fs proposes at most %d bytes per file", maxWriteBytes), "split the file")
		}
	}
	files, err := w.emit(chs)
	if err != nil {
		return nil, err
	}
	return map[string]any{"files": files}, nil
}
