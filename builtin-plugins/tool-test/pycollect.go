package main

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/fluffy-waffle/fluffy/plugins/tool/testrun"
)

// pytestCollectionFailure is the message attribute pytest's junitxml
// plugin gives the <error> of a module that failed to collect (import
// error, syntax error): the testcase then names the module, not a test.
const pytestCollectionFailure = "collection failure"

// pyFrame is one "path:line: in name" entry of pytest's short traceback.
type pyFrame struct {
	file string
	line int
}

// pytestCollectError turns one collection failure into a BuildError. The
// junit report carries the failure only as pytest's short traceback
// (frames "path:line: in name", then "E   Type: message" lines), so that
// fixed shape is read, line by line: the last frame is where the
// exception was raised, the last "E" line names its type. It is red
// (Undefined in a test file) only when a test module itself fails on a
// name that does not exist yet: ImportError of a name (`from calc import
// sub`), NameError, AttributeError, or ModuleNotFoundError of a module
// inside one of the project's own packages. Anything else — a syntax
// error anywhere, an error raised in a non-test module, a module that is
// neither in the project nor installed — is a build error. Anything the
// reader does not recognise is a build error too.
func pytestCollectError(c junitCase, ws string) testrun.BuildError {
	mod := c.Name
	if c.ClassName != "" {
		mod = c.ClassName + "." + c.Name
	}
	be := testrun.BuildError{Package: mod, File: strings.ReplaceAll(mod, ".", "/") + ".py",
		Message: textsafe.Cap(strings.TrimSpace(c.Error.Text), 1024)}
	var frames []pyFrame
	var excType, excMsg, synFile string
	synLine := 0
	for _, l := range strings.Split(c.Error.Text, "\n") {
		if rest, ok := strings.CutPrefix(l, "E "); ok {
			rest = strings.TrimSpace(rest)
			if f, ln, ok := pySyntaxLocation(rest); ok {
				synFile, synLine = f, ln
				continue
			}
			if t, m, ok := pyExceptionLine(rest); ok {
				excType, excMsg = t, m
			}
			continue
		}
		if f, ok := pyFrameLine(l); ok {
			frames = append(frames, f)
		}
	}
	if excType == "" {
		return be
	}
	be.Message = textsafe.Cap(excType+": "+excMsg, 1024)
	inProject := func(f string) (string, bool) {
		rel := relToWorkspace(ws, ws, f)
		return rel, !filepath.IsAbs(rel) && !strings.HasPrefix(rel, "<")
	}
	// Where: a syntax error's own location, else the last project frame.
	if synFile != "" {
		if rel, ok := inProject(synFile); ok {
			be.File, be.Line = rel, synLine
		}
	} else {
		for i := len(frames) - 1; i >= 0; i-- {
			if rel, ok := inProject(frames[i].file); ok {
				be.File, be.Line = rel, frames[i].line
				break
			}
		}
	}
	// Raised in a test module: the last frame of all is that module's.
	if len(frames) > 0 && synFile == "" {
		last := frames[len(frames)-1]
		if rel, ok := inProject(last.file); ok && rel == be.File {
			be.InTestFile = isPyTestFile(rel)
		}
	} else if synFile != "" {
		be.InTestFile = isPyTestFile(be.File)
	}
	switch excType {
	case "ImportError", "NameError", "AttributeError":
		be.Undefined = synFile == ""
	case "ModuleNotFoundError":
		be.Undefined = synFile == "" && projectPackage(ws, be.File, excMsg)
	}
	return be
}

// pyFrameLine parses "path:line: in name" (path not starting with '<',
// which marks frozen importlib frames).
func pyFrameLine(l string) (pyFrame, bool) {
	head, _, ok := strings.Cut(l, ": in ")
	if !ok || l == "" || l[0] == ' ' || l[0] == '<' {
		return pyFrame{}, false
	}
	i := strings.LastIndexByte(head, ':')
	if i <= 0 {
		return pyFrame{}, false
	}
	n, err := strconv.Atoi(head[i+1:])
	if err != nil || n <= 0 {
		return pyFrame{}, false
	}
	return pyFrame{file: head[:i], line: n}, true
}

// pyExceptionLine parses "Type: message" or "pkg.Type: message" where
// Type is a Python identifier ending in Error or Exception.
func pyExceptionLine(s string) (typ, msg string, ok bool) {
	t, m, _ := strings.Cut(s, ": ")
	if t == "" || strings.ContainsAny(t, " \t()'\"") {
		return "", "", false
	}
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		t = t[i+1:]
	}
	if !strings.HasSuffix(t, "Error") && !strings.HasSuffix(t, "Exception") {
		return "", "", false
	}
	return t, m, true
}

// pySyntaxLocation parses a SyntaxError's `File "path", line N`.
func pySyntaxLocation(s string) (string, int, bool) {
	rest, ok := strings.CutPrefix(s, `File "`)
	if !ok {
		return "", 0, false
	}
	f, rest, ok := strings.Cut(rest, `", line `)
	if !ok {
		return "", 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(rest))
	if err != nil {
		return "", 0, false
	}
	return f, n, true
}

// isPyTestFile: pytest's default test module names, test_*.py and *_test.py.
func isPyTestFile(rel string) bool {
	b := path.Base(rel)
	return strings.HasSuffix(b, ".py") && (strings.HasPrefix(b, "test_") || strings.HasSuffix(b, "_test.py"))
}

// projectPackage reports whether the module ModuleNotFoundError names
// ("No module named 'pkg.new'") is a new module of a package the project
// has, next to the failing file or at the project root: code to be
// written, not a dependency that is not installed.
func projectPackage(ws, file, msg string) bool {
	_, q, ok := strings.Cut(msg, "'")
	if !ok {
		return false
	}
	name, _, ok := strings.Cut(q, "'")
	top, _, sub := strings.Cut(name, ".")
	if !ok || !sub || top == "" || strings.ContainsAny(top, "/\\") || top == ".." {
		return false
	}
	for _, d := range []string{path.Dir(file), "."} {
		if st, err := os.Stat(filepath.Join(ws, filepath.FromSlash(d), top)); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}
