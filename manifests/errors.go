package manifests

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Error codes. Every problem this package reports carries one of these as its
// uerr Code; callers and tests branch on them with uerr.HasCode (or HasCode
// here, which is the same thing).
const (
	// CodeInvalid is the summary code of a *ValidationError; the individual
	// problems inside it keep their own codes.
	CodeInvalid = "MANIFEST_INVALID"

	CodeNotFound   = "MANIFEST_NOT_FOUND"
	CodeReadFailed = "MANIFEST_READ_FAILED"
	CodeTooLarge   = "MANIFEST_TOO_LARGE"
	CodeEmpty      = "MANIFEST_EMPTY"
	CodeMultiDoc   = "MANIFEST_MULTIPLE_DOCUMENTS"
	CodeYAMLSyntax = "MANIFEST_YAML_SYNTAX"
	CodeYAMLAlias  = "MANIFEST_YAML_ALIAS"

	CodeWrongType       = "MANIFEST_WRONG_TYPE"
	CodeUnknownField    = "MANIFEST_UNKNOWN_FIELD"
	CodeDuplicateField  = "MANIFEST_DUPLICATE_FIELD"
	CodeMissingField    = "MANIFEST_MISSING_FIELD"
	CodeMissingSHA256   = "MANIFEST_MISSING_SHA256"
	CodeFieldNotAllowed = "MANIFEST_FIELD_NOT_ALLOWED"
	CodeDuplicateValue  = "MANIFEST_DUPLICATE_VALUE"

	CodeBadName        = "MANIFEST_BAD_NAME"
	CodeBadSemver      = "MANIFEST_BAD_SEMVER"
	CodeBadKind        = "MANIFEST_BAD_KIND"
	CodeBadText        = "MANIFEST_BAD_TEXT"
	CodeEntryEscapes   = "MANIFEST_ENTRY_ESCAPES"
	CodeEntryAbsolute  = "MANIFEST_ENTRY_ABSOLUTE"
	CodeEntryInvalid   = "MANIFEST_ENTRY_INVALID"
	CodeBadSHA256      = "MANIFEST_BAD_SHA256"
	CodeBadAPIVersions = "MANIFEST_BAD_API_VERSIONS"
	CodeBadTemplate    = "MANIFEST_BAD_TEMPLATE"
	CodeBadUnit        = "MANIFEST_BAD_UNIT"
	CodeBadLimit       = "MANIFEST_BAD_LIMIT"
	CodeBadCapability  = "MANIFEST_BAD_CAPABILITY"
	// CodeUnknownCapability: a well-formed capability the kernel does not
	// grant (see KnownCapabilities).
	CodeUnknownCapability = "MANIFEST_UNKNOWN_CAPABILITY"
	CodeBadTag            = "MANIFEST_BAD_TAG"
	CodeNoTools           = "MANIFEST_NO_TOOLS"
	CodeBadToolName       = "MANIFEST_BAD_TOOL_NAME"
	CodeDuplicateTool     = "MANIFEST_DUPLICATE_TOOL"
	CodeBadSchema         = "MANIFEST_BAD_SCHEMA"
	CodeBadOutputMode     = "MANIFEST_BAD_OUTPUT_MODE"
	CodeBadLifetime       = "MANIFEST_BAD_LIFETIME"
	CodeBadNetworkHost    = "MANIFEST_BAD_NETWORK_HOST"
	CodeBadPathDecl       = "MANIFEST_BAD_PATH_DECL"

	CodeCapabilityUndeclared = "MANIFEST_CAPABILITY_UNDECLARED"

	CodeEntryMissing     = "MANIFEST_ENTRY_MISSING"
	CodeEntryNotRegular  = "MANIFEST_ENTRY_NOT_REGULAR"
	CodeEntrySymlink     = "MANIFEST_ENTRY_SYMLINK"
	CodeChecksumMismatch = "MANIFEST_CHECKSUM_MISMATCH"
	CodeStampFailed      = "MANIFEST_STAMP_FAILED"

	CodeToolArgsInvalid   = "TOOL_ARGS_INVALID"
	CodeToolSchemaMissing = "TOOL_SCHEMA_MISSING"
)

// FieldError is one problem in one manifest file, located by line, column
// and dotted field path (for example "tools[1].parameters"). Line and Column
// are 1-based; Line 0 means the problem has no single position (the file as
// a whole, or a Manifest built in code rather than parsed).
//
// A FieldError unwraps to a *uerr.Error with the same Code, so uerr.HasCode
// and uerr.As work on it.
type FieldError struct {
	File   string
	Line   int
	Column int
	Field  string
	Code   string
	What   string
	Why    string // optional: the rule behind the check
	Fix    string

	// next links the problems of one ValidationError so that uerr.HasCode,
	// which follows a single Unwrap chain, sees every code.
	next error
}

func (e *FieldError) location() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	return b.String()
}

// Error renders the problem on one line:
//
//	plugin.yaml:7: field "entry": path "../x" leaves the plugin directory — fix: ...
func (e *FieldError) Error() string {
	s := e.location() + ": " + e.What
	if e.Fix != "" {
		s += " — fix: " + e.Fix
	}
	return s
}

// UErr converts the problem into the user-facing error shape.
func (e *FieldError) UErr() *uerr.Error {
	u := uerr.Wrap(e.next, e.Code, e.location()+": "+e.What, e.Why, e.Fix)
	if e.Line > 0 {
		u.WithContext("%s:%d:%d", e.File, e.Line, e.Column)
	}
	return u
}

// Unwrap returns the problem as a *uerr.Error (whose own Unwrap continues to
// the next problem of the same ValidationError, if any).
func (e *FieldError) Unwrap() error { return e.UErr() }

// ValidationError holds every problem found in one manifest, sorted by line.
// It unwraps to a *uerr.Error with Code MANIFEST_INVALID that lists them all;
// uerr.HasCode(err, code) is true for the summary code and for the code of
// every problem inside.
type ValidationError struct {
	File   string
	Errors []*FieldError
}

func newValidationError(file string, errs []*FieldError) *ValidationError {
	sorted := append([]*FieldError(nil), errs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].Line != sorted[j].Line {
			return sorted[i].Line < sorted[j].Line
		}
		return sorted[i].Column < sorted[j].Column
	})
	for i := range sorted {
		sorted[i].next = nil
		if i+1 < len(sorted) {
			sorted[i].next = sorted[i+1]
		}
	}
	return &ValidationError{File: file, Errors: sorted}
}

func (e *ValidationError) Error() string {
	if len(e.Errors) == 1 {
		return e.Errors[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", e.File, len(e.Errors))
	for _, fe := range e.Errors {
		b.WriteString("\n  ")
		b.WriteString(fe.Error())
	}
	return b.String()
}

// UErr converts the whole set into one user-facing error: What names the
// file and the count, Why lists every problem with its own fix.
func (e *ValidationError) UErr() *uerr.Error {
	n := len(e.Errors)
	what := fmt.Sprintf("%s is not a valid plugin manifest (%d problem", e.File, n)
	if n != 1 {
		what += "s"
	}
	what += ")"
	lines := make([]string, 0, n)
	for _, fe := range e.Errors {
		lines = append(lines, fe.Error())
	}
	why := strings.Join(lines, "\n  ")
	if n > 1 {
		why = "\n  " + why
	}
	fix := "correct each problem listed above (each names its own fix), then run the command again"
	if n == 1 {
		fe := e.Errors[0]
		why = fe.location() + ": " + fe.What
		if fe.Why != "" {
			why += " (" + fe.Why + ")"
		}
		fix = fe.Fix
	}
	var first error
	if n > 0 {
		first = e.Errors[0]
	}
	return uerr.Wrap(first, CodeInvalid, what, why, fix)
}

// Unwrap returns the summary *uerr.Error, from which the chain continues
// through every FieldError.
func (e *ValidationError) Unwrap() error { return e.UErr() }

// Has reports whether one of the problems carries code.
func (e *ValidationError) Has(code string) bool {
	for _, fe := range e.Errors {
		if fe.Code == code {
			return true
		}
	}
	return false
}

// HasCode reports whether err is, or contains, a problem with the given code.
// It is uerr.HasCode plus a direct look inside a *ValidationError, so it
// holds even for a ValidationError assembled by hand.
func HasCode(err error, code string) bool {
	var ve *ValidationError
	if errors.As(err, &ve) && ve.Has(code) {
		return true
	}
	return uerr.HasCode(err, code)
}

// Problems returns the individual problems inside err (nil if err holds no
// ValidationError or FieldError).
func Problems(err error) []*FieldError {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Errors
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return []*FieldError{fe}
	}
	return nil
}
