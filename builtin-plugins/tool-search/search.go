package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"regexp"
	"strconv"
	"syscall"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/lib/glob"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
	"github.com/fluffy-waffle/fluffy/pluginsdk/toolpath"
)

const (
	defaultGrepResults = 200
	maxGrepResults     = 2000
	defaultGlobResults = 1000
	maxGlobResults     = 10000
	// maxLineBytes bounds the text of one reported line (minified files).
	maxLineBytes = 400
	// maxFileBytes: larger files are skipped and counted, not searched.
	maxFileBytes = 64 << 20
	// maxPatternBytes bounds a regular expression or glob.
	maxPatternBytes = 4096
)

const (
	summaryGrep = "Search project files for a regular expression (Go RE2 syntax); returns file:line:text lines"
	summaryGlob = "List project files whose path matches a .gitignore-style glob (e.g. **/*_test.go)"
	schemaGrep  = `{"type":"object","properties":{"pattern":{"type":"string","minLength":1,"maxLength":4096,"description":"Regular expression to search for (Go RE2 syntax, e.g. func \\w+Handler)"},"path":{"type":"string","description":"File or directory to search, relative to the project root (absent: the whole project)"},"glob":{"type":"string","maxLength":4096,"description":"Only search files whose path matches this .gitignore-style glob (e.g. **/*.go)"},"ignore_case":{"type":"boolean","description":"Match letters regardless of case"},"max_results":{"type":"integer","minimum":1,"maximum":2000,"description":"Most matching lines to return (default 200, at most 2000)"}},"required":["pattern"],"additionalProperties":false}`
	schemaGlob  = `{"type":"object","properties":{"pattern":{"type":"string","minLength":1,"maxLength":4096,"description":".gitignore-style glob of project paths to list (e.g. **/*_test.go, src/*.py)"},"path":{"type":"string","description":"Directory to list below, relative to the project root (absent: the whole project)"},"max_results":{"type":"integer","minimum":1,"maximum":10000,"description":"Most paths to return (default 1000, at most 10000)"}},"required":["pattern"],"additionalProperties":false}`
)

func newToolSet(logger hclog.Logger) *pluginsdk.ToolSet {
	return &pluginsdk.ToolSet{
		Name:    "tool-search",
		Version: version,
		Logger:  logger,
		Specs: []pluginsdk.ToolSpec{
			{Def: tool.Def{Name: "search.grep", Summary: summaryGrep, Parameters: json.RawMessage(schemaGrep), OutputMode: tool.OutputFull}, Handler: grep},
			{Def: tool.Def{Name: "search.glob", Summary: summaryGlob, Parameters: json.RawMessage(schemaGlob), OutputMode: tool.OutputFull}, Handler: globTool},
		},
	}
}

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	IgnoreCase bool   `json:"ignore_case"`
	MaxResults int    `json:"max_results"`
}

// grepResult is search.grep's output. Matches are "path:line:text" with the
// path relative to the project root and the line 1-based.
type grepResult struct {
	Matches   []string `json:"matches"`
	Count     int      `json:"count"`
	Truncated bool     `json:"truncated"`
	// Note says why the list stopped and how to get the rest.
	Note          string `json:"note,omitempty"`
	FilesSearched int    `json:"files_searched"`
	BinarySkipped int    `json:"binary_skipped,omitempty"`
	LargeSkipped  int    `json:"large_skipped,omitempty"`
}

// target is the validated path argument of a search: the project root,
// a directory or a single file.
type target struct {
	root  string // host path of the workspace
	rel   string // cleaned, "." for the root
	isDir bool
}

func resolveTarget(tc *pluginsdk.ToolContext, p string) (target, error) {
	rel, err := toolpath.Clean(p)
	if err != nil {
		return target{}, err
	}
	root, err := toolpath.OpenRoot("tool-search", tc.Workspace)
	if err != nil {
		return target{}, err
	}
	defer root.Close()
	// Lstat through the root: the target itself must not be a symlink
	// (the walk never follows one either), and no component may leave it.
	st, err := root.Lstat(rel)
	if err != nil {
		return target{}, toolpath.Err(rel, err)
	}
	if st.Mode()&os.ModeSymlink != 0 {
		return target{}, uerr.New("SEARCH_SYMLINK", fmt.Sprintf("%s is a symbolic link", rel), "searches never follow symlinks, so a link cannot lead outside the project", "search the link's target path instead")
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return target{}, uerr.New("SEARCH_NOT_FILE", fmt.Sprintf("%s is neither a file nor a directory", rel), "only regular files are searched", "name a file or a directory")
	}
	return target{root: tc.Workspace, rel: rel, isDir: st.IsDir()}, nil
}

func compileGlob(g string) (*glob.Pattern, error) {
	if g == "" {
		return nil, nil
	}
	p, err := glob.Compile(g)
	if err != nil {
		return nil, uerr.Wrap(err, "SEARCH_BAD_GLOB", fmt.Sprintf("glob %q cannot be used", g), err.Error(),
			`use a .gitignore-style pattern such as "*.go", "src/**/*.ts" or "!*_test.go"`)
	}
	return p, nil
}

// globMatch: a pattern matches a path or one of its directories; a negated
// pattern ("!*_test.go") selects everything it does not match.
func globMatch(p *glob.Pattern, rel string) bool {
	if p == nil {
		return true
	}
	return p.Match(glob.ParsePath(rel)) != p.Negated()
}

func grep(ctx context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a grepArgs
	if err := pluginsdk.DecodeArgs("search.grep", raw, &a); err != nil {
		return nil, err
	}
	if len(a.Pattern) > maxPatternBytes {
		return nil, uerr.New("SEARCH_BAD_PATTERN", "the pattern is too long", fmt.Sprintf("patterns are limited to %d bytes", maxPatternBytes), "search for a shorter, more specific pattern")
	}
	flags := "(?m)"
	if a.IgnoreCase {
		flags = "(?mi)"
	}
	re, err := regexp.Compile(flags + a.Pattern)
	if err != nil {
		return nil, uerr.Wrap(err, "SEARCH_BAD_PATTERN", fmt.Sprintf("pattern %q is not a valid regular expression", a.Pattern), err.Error(),
			"use Go RE2 syntax (no backreferences or lookaround); escape literal characters such as ( [ . with a backslash")
	}
	g, err := compileGlob(a.Glob)
	if err != nil {
		return nil, err
	}
	limit := a.MaxResults
	if limit <= 0 {
		limit = defaultGrepResults
	}
	limit = min(limit, maxGrepResults)
	tg, err := resolveTarget(tc, a.Path)
	if err != nil {
		return nil, err
	}
	s := &searcher{re: re, limit: limit, res: grepResult{Matches: []string{}}}
	w := &walker{root: tg.root, ctx: ctx}
	if !tg.isDir {
		// An explicitly named file is searched whatever the ignore files say.
		if globMatch(g, tg.rel) {
			d, err := w.openDir(path.Dir(tg.rel))
			if err != nil {
				return nil, toolpath.Err(tg.rel, err)
			}
			s.file(int(d.Fd()), path.Base(tg.rel), tg.rel)
			d.Close()
		}
	} else {
		err = w.walk(tg.rel, func(dirfd int, name, rel string, _ bool) error {
			if !globMatch(g, rel) {
				return nil
			}
			s.file(dirfd, name, rel)
			if s.res.Truncated {
				return errStop
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", tg.rel, err)
		}
	}
	s.res.Count = len(s.res.Matches)
	if s.res.Truncated {
		s.res.Note = fmt.Sprintf("stopped at %d matching lines; narrow the pattern, path or glob, or raise max_results (at most %d)", limit, maxGrepResults)
	}
	return s.res, nil
}

// searcher searches files one after the other with one reused buffer. The
// sandbox gives search one CPU, and the page cache makes reads memory
// copies, so parallel workers would only add scheduling.
type searcher struct {
	re    *regexp.Regexp
	limit int
	buf   []byte
	res   grepResult
}

// readFile reads a regular file into the reused buffer; ok=false means
// skipped. It uses raw syscalls: an os.File registers every descriptor with
// the runtime's poller and sets a finalizer, which for ten thousand small
// files costs more than reading them. O_NOFOLLOW: never through a symlink;
// O_NONBLOCK: a file swapped for a FIFO cannot hang the search.
func (s *searcher) readFile(dirfd int, name string) ([]byte, bool) {
	fd, err := openAt(dirfd, name, syscall.O_NONBLOCK)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	if cap(s.buf) < 64<<10 {
		s.buf = make([]byte, 64<<10)
	}
	b := s.buf[:cap(s.buf)]
	n := 0
	for {
		m, err := syscall.Read(fd, b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, false // a directory, a FIFO without writer, an I/O error
		}
		if m == 0 {
			break
		}
		n += m
		if n == len(b) {
			if n >= maxFileBytes {
				s.res.LargeSkipped++
				return nil, false
			}
			nb := make([]byte, 2*len(b))
			copy(nb, b[:n])
			s.buf, b = nb, nb
		}
	}
	return b[:n], true
}

// file searches one file; every line with a match is reported once.
func (s *searcher) file(dirfd int, name, rel string) {
	data, ok := s.readFile(dirfd, name)
	if !ok {
		return
	}
	if isBinary(data) {
		s.res.BinarySkipped++
		return
	}
	s.res.FilesSearched++
	// pos is always the start of a line; lines before it are done.
	line, counted := 1, 0
	for pos := 0; pos < len(data); {
		loc := s.re.FindIndex(data[pos:])
		if loc == nil {
			return
		}
		at := pos + loc[0]
		if at >= len(data) {
			return // an empty match after the last newline: no line there
		}
		start := pos + bytes.LastIndexByte(data[pos:at], '\n') + 1
		end := len(data)
		if i := bytes.IndexByte(data[at:], '\n'); i >= 0 {
			end = at + i
		}
		text := data[start:end]
		// A match running past the line's end is not a grep match: the
		// line must match on its own.
		if pos+loc[1] > end && !s.re.Match(text) {
			pos = end + 1
			continue
		}
		if len(s.res.Matches) >= s.limit {
			s.res.Truncated = true
			return
		}
		line += bytes.Count(data[counted:start], []byte{'\n'})
		counted = start
		s.res.Matches = append(s.res.Matches, rel+":"+strconv.Itoa(line)+":"+clip(text))
		pos = end + 1
	}
}

// clip bounds a reported line, cutting on a rune boundary, and drops a
// trailing carriage return.
func clip(b []byte) string {
	b = bytes.TrimSuffix(b, []byte{'\r'})
	if len(b) <= maxLineBytes {
		return string(b)
	}
	cut := maxLineBytes
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + fmt.Sprintf(" …[line truncated, %d bytes]", len(b))
}

type globArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	MaxResults int    `json:"max_results"`
}

type globResult struct {
	Paths     []string `json:"paths"`
	Count     int      `json:"count"`
	Truncated bool     `json:"truncated"`
	Note      string   `json:"note,omitempty"`
}

// globTool lists files (and, for a pattern ending in "/", directories)
// below path whose path relative to path matches the pattern. Results are
// relative to the project root, ready for fs.read.
func globTool(ctx context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a globArgs
	if err := pluginsdk.DecodeArgs("search.glob", raw, &a); err != nil {
		return nil, err
	}
	if len(a.Pattern) > maxPatternBytes {
		return nil, uerr.New("SEARCH_BAD_GLOB", "the glob is too long", fmt.Sprintf("globs are limited to %d bytes", maxPatternBytes), "use a shorter pattern")
	}
	p, err := compileGlob(a.Pattern)
	if err != nil {
		return nil, err
	}
	limit := a.MaxResults
	if limit <= 0 {
		limit = defaultGlobResults
	}
	limit = min(limit, maxGlobResults)
	tg, err := resolveTarget(tc, a.Path)
	if err != nil {
		return nil, err
	}
	if !tg.isDir {
		return nil, uerr.New("FS_NOT_DIR", fmt.Sprintf("%s is not a directory", tg.rel), "search.glob lists files below a directory", "pass a directory as path, or none for the project root")
	}
	dirsToo := a.Pattern[len(a.Pattern)-1] == '/'
	res := globResult{Paths: []string{}}
	w := &walker{root: tg.root, ctx: ctx, visitDirs: dirsToo}
	err = w.walk(tg.rel, func(_ int, _, rel string, isDir bool) error {
		sub := rel
		if tg.rel != "." {
			sub = rel[len(tg.rel)+1:]
		}
		if isDir {
			sub += "/"
		}
		if !globMatchSelf(p, sub) {
			return nil
		}
		if len(res.Paths) >= limit {
			res.Truncated = true
			return errStop
		}
		if isDir {
			rel += "/"
		}
		res.Paths = append(res.Paths, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("glob %s: %w", tg.rel, err)
	}
	res.Count = len(res.Paths)
	if res.Truncated {
		res.Note = fmt.Sprintf("stopped at %d paths; narrow the pattern or path, or raise max_results (at most %d)", limit, maxGlobResults)
	}
	return res, nil
}

// globMatchSelf: search.glob lists the paths the pattern names, not every
// file below a matching directory ("src" lists src/ only with "src/").
func globMatchSelf(p *glob.Pattern, rel string) bool {
	return p.MatchSelf(glob.ParsePath(rel)) != p.Negated()
}
