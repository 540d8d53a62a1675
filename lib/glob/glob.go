package glob

import (
	"fmt"
	"path"
	"strings"
)

type segKind uint8

const (
	segLiteral segKind = iota
	segWild
	segDoubleStar
	segStars // only '*' wildcards: matched by starMatch without path.Match
	segAny   // exactly one segment, whatever it is
)

type segment struct {
	kind  segKind
	text  string
	parts []string // segStars: text split at '*'
}

// starMatch matches name against parts (text split at '*'): the first part
// is a prefix, the last a suffix, the middle ones appear in order.
func starMatch(parts []string, name string) bool {
	first, last := parts[0], parts[len(parts)-1]
	if len(name) < len(first)+len(last) || name[:len(first)] != first || name[len(name)-len(last):] != last {
		return false
	}
	name = name[len(first) : len(name)-len(last)]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(name, mid)
		if i < 0 {
			return false
		}
		name = name[i+len(mid):]
	}
	return true
}

func (s segment) match(name string) bool {
	switch s.kind {
	case segLiteral:
		return s.text == name
	case segStars:
		return starMatch(s.parts, name)
	case segWild:
		ok, _ := path.Match(s.text, name) // validated at compile time
		return ok
	}
	// segAny (and segDoubleStar, which match never sees)
	return true
}

// Pattern is one compiled gitignore-style pattern.
type Pattern struct {
	raw     string
	negate  bool
	dirOnly bool
	segs    []segment
	full    []segment // segs with a trailing "**" made "at least one"
	anc     []segment // full + "one or more": matches an ancestor directory
	// lits is set for the common shape "a/b/c" or "a/b/**" (anchored,
	// literal segments, optionally one trailing "**", not dir-only): Match
	// then compares a prefix instead of running seqMatch twice.
	lits     []string
	litsMore bool // the trailing "**": at least one more segment needed
}

// String returns the pattern as written.
func (p *Pattern) String() string { return p.raw }

// Negated reports whether the pattern is an exclude (`!pattern`).
func (p *Pattern) Negated() bool { return p.negate }

// Error is returned by Compile for a pattern that cannot be used.
type Error struct {
	Pattern string
	Why     string
}

func (e *Error) Error() string { return fmt.Sprintf("glob %q: %s", e.Pattern, e.Why) }

// Compile parses one pattern. Comments (`#`), surrounding blanks and empty
// patterns are rejected instead of being silently ignored as in a
// .gitignore file, because in a policy they are almost certainly mistakes.
func Compile(raw string) (*Pattern, error) {
	p := &Pattern{raw: raw}
	s := raw
	switch {
	case s == "":
		return nil, &Error{raw, "empty pattern"}
	case strings.TrimSpace(s) != s:
		return nil, &Error{raw, "leading or trailing blanks"}
	case strings.HasPrefix(s, "#"):
		return nil, &Error{raw, "starts with '#', which .gitignore treats as a comment; write \\# for a literal"}
	case strings.Contains(s, "\\") && strings.HasSuffix(s, "\\") && !strings.HasSuffix(s, "\\\\"):
		return nil, &Error{raw, "ends with a lone backslash"}
	}
	if strings.HasPrefix(s, "!") {
		p.negate = true
		s = s[1:]
	}
	if strings.HasPrefix(s, "\\!") || strings.HasPrefix(s, "\\#") {
		s = s[1:]
	}
	if strings.HasSuffix(s, "/") {
		p.dirOnly = true
		s = strings.TrimRight(s, "/")
	}
	anchored := strings.Contains(s, "/")
	s = strings.TrimPrefix(s, "/")
	if s == "" {
		return nil, &Error{raw, "matches nothing (only slashes)"}
	}
	parts := strings.Split(s, "/")
	if !anchored {
		p.segs = append(p.segs, segment{kind: segDoubleStar})
	}
	for _, part := range parts {
		switch {
		case part == "":
			return nil, &Error{raw, "empty path segment ('//')"}
		case part == "**":
			if n := len(p.segs); n > 0 && p.segs[n-1].kind == segDoubleStar {
				continue // a/**/**/b == a/**/b
			}
			p.segs = append(p.segs, segment{kind: segDoubleStar})
		case !strings.ContainsAny(part, "?[\\") && strings.Contains(part, "*"):
			p.segs = append(p.segs, segment{kind: segStars, text: part, parts: strings.Split(part, "*")})
		case strings.ContainsAny(part, "*?[\\"):
			// .gitignore spells a negated class [!...]; path.Match wants [^...].
			text := strings.ReplaceAll(part, "[!", "[^")
			if _, err := path.Match(text, ""); err != nil {
				return nil, &Error{raw, "malformed character class or escape in " + part}
			}
			p.segs = append(p.segs, segment{kind: segWild, text: text})
		default:
			p.segs = append(p.segs, segment{kind: segLiteral, text: part})
		}
	}
	p.full = append([]segment(nil), p.segs...)
	if n := len(p.full); p.full[n-1].kind == segDoubleStar {
		p.full = append(p.full[:n-1], segment{kind: segAny}, segment{kind: segDoubleStar})
	}
	p.anc = append(append([]segment(nil), p.full...), segment{kind: segAny}, segment{kind: segDoubleStar})
	p.lits, p.litsMore = literalPrefix(p)
	return p, nil
}

// literalPrefix recognizes the shapes Match can answer by prefix comparison
// (see Pattern.lits); it returns nil for every other pattern.
func literalPrefix(p *Pattern) ([]string, bool) {
	if p.dirOnly {
		return nil, false
	}
	segs, more := p.segs, false
	if n := len(segs); n > 0 && segs[n-1].kind == segDoubleStar {
		segs, more = segs[:n-1], true
	}
	if len(segs) == 0 {
		return nil, false
	}
	lits := make([]string, len(segs))
	for i, s := range segs {
		if s.kind != segLiteral {
			return nil, false
		}
		lits[i] = s.text
	}
	return lits, more
}

// seqMatch is the classic wildcard algorithm over segments: "**" is a star
// over whole segments, every other element matches exactly one segment.
// Backtracking only to the last "**" keeps it O(len(pat)·len(segs)).
func seqMatch(pat []segment, segs []string) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(segs) {
		switch {
		case pi < len(pat) && pat[pi].kind == segDoubleStar:
			starP, starS = pi, si
			pi++
		case pi < len(pat) && pat[pi].match(segs[si]):
			pi++
			si++
		case starP >= 0:
			starS++
			pi, si = starP+1, starS
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi].kind == segDoubleStar {
		pi++
	}
	return pi == len(pat)
}

// Path is a project-relative, slash-separated path split once so that many
// patterns can be matched against it without allocating.
type Path struct {
	segs  []string
	isDir bool
}

// ParsePath splits p. A trailing slash marks a directory. Empty segments
// and "." segments are dropped; callers clean paths before (".." is the
// caller's business).
func ParsePath(p string) Path {
	return ParsePathBuf(nil, p)
}

// ParsePathBuf is ParsePath storing the segments in buf[:0] (growing it
// only when it is too small), so a caller with a stack array can split a
// path without a heap allocation. The Path refers to buf: the caller must
// not reuse buf while the Path is in use.
func ParsePathBuf(buf []string, p string) Path {
	var out Path
	if strings.HasSuffix(p, "/") {
		out.isDir = true
	}
	if buf == nil {
		t := strings.Trim(p, "/")
		if t == "" {
			return out
		}
		buf = make([]string, 0, strings.Count(t, "/")+1)
	}
	// One byte loop: splitting at every '/' and dropping "" and "."
	// segments is what trimming the slashes and then splitting did.
	out.segs = buf[:0]
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		if s := p[start:i]; s != "" && s != "." {
			out.segs = append(out.segs, s)
		}
		start = i + 1
	}
	if s := p[start:]; s != "" && s != "." {
		out.segs = append(out.segs, s)
	}
	return out
}

// HasSegment reports whether one of the path's segments is exactly seg.
func (p Path) HasSegment(seg string) bool {
	for _, s := range p.segs {
		if s == seg {
			return true
		}
	}
	return false
}

// Empty reports whether the path has no segments (no path given).
func (p Path) Empty() bool { return len(p.segs) == 0 }

// First returns the first segment ("" for an empty path).
func (p Path) First() string {
	if len(p.segs) == 0 {
		return ""
	}
	return p.segs[0]
}

// IsDir reports whether the path was marked as a directory.
func (p Path) IsDir() bool { return p.isDir }

// String rebuilds the cleaned path.
func (p Path) String() string {
	s := strings.Join(p.segs, "/")
	if p.isDir {
		s += "/"
	}
	return s
}

// Match reports whether the pattern matches the path itself or one of its
// ancestor directories, ignoring negation.
func (p *Pattern) Match(pth Path) bool {
	segs := pth.segs
	if len(segs) == 0 {
		return false
	}
	if p.lits != nil {
		// "a/b" matches a/b and everything below it (full, then anc);
		// "a/b/**" matches everything strictly below a/b.
		n := len(p.lits)
		if len(segs) < n || (p.litsMore && len(segs) == n) {
			return false
		}
		for i, l := range p.lits {
			if segs[i] != l {
				return false
			}
		}
		return true
	}
	if len(p.segs) == 2 && p.segs[0].kind == segDoubleStar && p.segs[1].kind != segDoubleStar {
		// The common "name at any depth" pattern: one pass, no recursion.
		s := p.segs[1]
		last := len(segs) - 1
		for k, name := range segs {
			if s.match(name) && (k < last || !p.dirOnly || pth.isDir) {
				return true
			}
		}
		return false
	}
	if (!p.dirOnly || pth.isDir) && seqMatch(p.full, segs) {
		return true
	}
	return seqMatch(p.anc, segs)
}

// MatchSelf reports whether the pattern matches the path itself, not
// merely one of its ancestor directories, ignoring negation. A walker that
// prunes matched directories (a .gitignore reader applying git's
// last-match-wins per path) needs this; Match answers the policy question
// "is this path covered".
func (p *Pattern) MatchSelf(pth Path) bool {
	return len(pth.segs) > 0 && (!p.dirOnly || pth.isDir) && seqMatch(p.full, pth.segs)
}

// Set is a list of patterns: a path matches when some include matches it
// and no exclude does. An empty Set, or one with only excludes, matches
// nothing.
type Set struct {
	include []*Pattern
	exclude []*Pattern
	raw     []string
	// names holds the includes of the shape "name" or "name/" (a literal
	// name at any depth), value true when only a directory of that name
	// matches. They are answered by one lookup per path segment instead of
	// a pass per pattern: long lists of file names (build and lock files)
	// are the common case.
	names map[string]bool
	// exts holds the includes of the shape "*.ext" or "*.a.ext" (a
	// suffix at any depth), by the name's last extension: one lookup per
	// segment instead of a pass per pattern.
	exts map[string][]suffixPat
	scan []*Pattern // the includes names and exts do not hold
}

type suffixPat struct {
	suffix  string // ".config.js"
	dirOnly bool
}

// extKey is the last extension of a suffix pattern's suffix ("js" for
// ".config.js"), or "" when the pattern is not of that shape.
func extKey(p *Pattern) string {
	if len(p.segs) != 2 || p.segs[0].kind != segDoubleStar || p.segs[1].kind != segStars {
		return ""
	}
	parts := p.segs[1].parts
	if len(parts) != 2 || parts[0] != "" || !strings.HasPrefix(parts[1], ".") {
		return ""
	}
	ext := parts[1][strings.LastIndexByte(parts[1], '.')+1:]
	if ext == "" {
		return ""
	}
	return ext
}

// CompileSet compiles every pattern; the first bad one is returned as error.
func CompileSet(patterns []string) (*Set, error) {
	s := &Set{raw: append([]string(nil), patterns...)}
	for _, raw := range patterns {
		p, err := Compile(raw)
		if err != nil {
			return nil, err
		}
		switch {
		case p.negate:
			s.exclude = append(s.exclude, p)
		case len(p.segs) == 2 && p.segs[0].kind == segDoubleStar && p.segs[1].kind == segLiteral:
			if s.names == nil {
				s.names = map[string]bool{}
			}
			// "name" (file or directory) covers "name/" (directory only).
			if dirOnly, seen := s.names[p.segs[1].text]; !seen || dirOnly {
				s.names[p.segs[1].text] = p.dirOnly
			}
			s.include = append(s.include, p) // kept for MatchRoot and HasInclude
		case extKey(p) != "":
			if s.exts == nil {
				s.exts = map[string][]suffixPat{}
			}
			k := extKey(p)
			s.exts[k] = append(s.exts[k], suffixPat{suffix: p.segs[1].parts[1], dirOnly: p.dirOnly})
			s.include = append(s.include, p)
		default:
			s.include = append(s.include, p)
			s.scan = append(s.scan, p)
		}
	}
	return s, nil
}

// byName is the part of Match for the patterns in names and exts.
func (s *Set) byName(pth Path) bool {
	last := len(pth.segs) - 1
	for k, name := range pth.segs {
		if dirOnly, ok := s.names[name]; ok && (k < last || !dirOnly || pth.isDir) {
			return true
		}
		if s.exts == nil {
			continue
		}
		dot := strings.LastIndexByte(name, '.')
		if dot < 0 {
			continue
		}
		for _, sp := range s.exts[name[dot+1:]] {
			// "*" matches the empty string, so ".lock" matches "*.lock".
			if strings.HasSuffix(name, sp.suffix) && (k < last || !sp.dirOnly || pth.isDir) {
				return true
			}
		}
	}
	return false
}

// MustCompileSet is CompileSet for patterns fixed in the source code.
func MustCompileSet(patterns ...string) *Set {
	s, err := CompileSet(patterns)
	if err != nil {
		panic(err)
	}
	return s
}

// Patterns returns the patterns as written.
func (s *Set) Patterns() []string { return s.raw }

// Len is the number of patterns.
func (s *Set) Len() int { return len(s.raw) }

// HasInclude reports whether at least one pattern is not an exclude; a set
// without one can never match.
func (s *Set) HasInclude() bool { return len(s.include) > 0 }

// Match reports whether pth is matched: some include and no exclude.
func (s *Set) Match(pth Path) bool {
	hit := (s.names != nil || s.exts != nil) && len(pth.segs) > 0 && s.byName(pth)
	for _, p := range s.scan {
		if hit {
			break
		}
		hit = p.Match(pth)
	}
	if !hit {
		return false
	}
	for _, p := range s.exclude {
		if p.Match(pth) {
			return false
		}
	}
	return true
}

// MatchRoot reports whether the set matches the project root itself (a
// path with no segments, such as "."): only a pattern made of nothing but
// "**" ("zero or more segments") matches it, and such an exclude wins.
func (s *Set) MatchRoot() bool {
	hit := false
	for _, p := range s.include {
		if p.onlyDoubleStar() {
			hit = true
			break
		}
	}
	if !hit {
		return false
	}
	for _, p := range s.exclude {
		if p.onlyDoubleStar() {
			return false
		}
	}
	return true
}

func (p *Pattern) onlyDoubleStar() bool {
	for _, sg := range p.segs {
		if sg.kind != segDoubleStar {
			return false
		}
	}
	return len(p.segs) > 0
}

// MatchString is Match for a path string (allocates; for tools and tests).
func (s *Set) MatchString(p string) bool { return s.Match(ParsePath(p)) }
