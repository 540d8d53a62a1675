package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fluffy-waffle/fluffy/lib/nearest"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/lib/yamlpos"
)

// Load reads and validates a manifest. path is either the plugin.yaml file or
// the plugin directory holding it. File-system problems are *uerr.Error
// (MANIFEST_NOT_FOUND, MANIFEST_READ_FAILED, MANIFEST_TOO_LARGE); problems in
// the content are a *ValidationError.
func Load(path string) (*Manifest, error) {
	fi, err := os.Stat(path)
	if err == nil && fi.IsDir() {
		path = filepath.Join(path, FileName)
		fi, err = os.Stat(path)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, uerr.Wrap(err, CodeNotFound,
				fmt.Sprintf("plugin manifest %s does not exist", path),
				"every plugin directory needs a "+FileName+" describing the plugin",
				"point at the plugin directory or its "+FileName+", or create the file (see manifests/testdata/valid for examples)")
		}
		return nil, uerr.Wrap(err, CodeReadFailed, fmt.Sprintf("cannot read plugin manifest %s", path), err.Error(),
			"check that the file exists and is readable by the current user")
	}
	if !fi.Mode().IsRegular() {
		return nil, uerr.New(CodeReadFailed, fmt.Sprintf("plugin manifest %s is not a regular file", path),
			"a manifest must be a plain file (not a device, pipe or socket)",
			"replace it with a regular "+FileName)
	}
	if fi.Size() > MaxSize {
		return nil, tooLarge(path, fi.Size())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, uerr.Wrap(err, CodeReadFailed, fmt.Sprintf("cannot read plugin manifest %s", path), err.Error(),
			"check that the file is readable by the current user")
	}
	defer f.Close()
	// The limit guards against a file that grew after the Stat.
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, uerr.Wrap(err, CodeReadFailed, fmt.Sprintf("cannot read plugin manifest %s", path), err.Error(),
			"check that the file is readable by the current user")
	}
	return Parse(path, data)
}

func tooLarge(path string, size int64) *uerr.Error {
	return uerr.New(CodeTooLarge, fmt.Sprintf("plugin manifest %s is %d bytes", path, size),
		fmt.Sprintf("manifests are limited to %d bytes (1 MiB) so a broken or hostile plugin cannot exhaust memory at discovery", MaxSize),
		"keep plugin.yaml small: move large JSON Schemas' descriptions into the plugin's documentation")
}

// Parse validates manifest bytes. path names the file in errors and decides
// Dir and Path; it is not read. The result is fully validated, with defaults
// applied (sandbox template per kind, tool output_mode patch, lifetime
// session).
func Parse(path string, data []byte) (*Manifest, error) {
	file := path
	if file == "" {
		file = FileName
	}
	d := &decoder{file: file, pos: map[string]yamlpos.Pos{}, bad: map[string]bool{}}
	m := d.document(data)
	if m != nil {
		m.file = file
		applyDefaults(m)
		d.errs = append(d.errs, m.validate()...)
		m.bad = nil
	}
	if len(d.errs) > 0 {
		return nil, newValidationError(file, d.errs)
	}
	m.Path, m.Dir = absPaths(path)
	return m, nil
}

func absPaths(path string) (p, dir string) {
	if path == "" {
		path = FileName
	}
	if a, err := filepath.Abs(path); err == nil {
		path = a
	}
	return path, filepath.Dir(path)
}

// decoder turns the YAML node tree into a Manifest, checking structure and
// types and remembering where every field was.
type decoder struct {
	file string
	errs []*FieldError
	pos  map[string]yamlpos.Pos
	bad  map[string]bool // fields already reported, so validate stays quiet about them
}

func (d *decoder) addAt(p yamlpos.Pos, field, code, what, why, fix string) {
	if field != "" {
		d.bad[field] = true
	}
	d.errs = append(d.errs, &FieldError{File: d.file, Line: p.Line, Column: p.Col, Field: field,
		Code: code, What: what, Why: why, Fix: fix})
}

func (d *decoder) add(n *yaml.Node, field, code, what, why, fix string) {
	d.addAt(yamlpos.Of(n), field, code, what, why, fix)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

func (d *decoder) syntaxError(err error, data []byte) {
	msg := err.Error()
	line := 0
	if sm := yamlLineRE.FindStringSubmatch(msg); sm != nil {
		line, _ = strconv.Atoi(sm[1])
		msg = msg[len(sm[0]):]
		line = problemLine(data, msg, line)
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
		line = firstBadLine(data)
	}
	d.addAt(yamlpos.Pos{Line: line, Col: 0}, "", CodeYAMLSyntax, "YAML syntax error: "+msg,
		"the file must be one valid YAML document", "correct the YAML at that line (indentation, a missing \":\" or an unclosed quote are the usual causes)")
}

// problemLine finds the line a YAML error is really about. yaml.v3 reports
// the start of the enclosing construct (and, for parser errors, one line too
// early), so a syntax error in a manifest's tools section would point at its
// first line. Instead, binary-search the shortest prefix of the file that
// fails with the same message: its last line is where parsing went wrong.
func problemLine(data []byte, msg string, reported int) int {
	lines := splitLinesKeep(data)
	failsSame := func(n int) bool {
		prefix := bytes.Join(lines[:n], nil)
		dec := yaml.NewDecoder(bytes.NewReader(prefix))
		for {
			var node yaml.Node
			err := decodeNode(dec, &node)
			if err == nil {
				continue
			}
			if errors.Is(err, io.EOF) {
				return false
			}
			m := err.Error()
			if sm := yamlLineRE.FindStringSubmatch(m); sm != nil {
				m = m[len(sm[0]):]
			}
			return m == msg
		}
	}
	lo, hi := 1, len(lines)
	if hi == 0 || !failsSame(hi) {
		return max(reported, 1)
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if failsSame(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// firstBadLine finds the line of the first byte YAML refuses outright
// (invalid UTF-8 or a control character); 1 if there is none.
func firstBadLine(data []byte) int {
	line := 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return line
		}
		if r == '\n' {
			line++
		} else if r < 0x20 && r != '\t' && r != '\r' || r == 0x7f {
			return line
		}
		i += size
	}
	return 1
}

// decodeNode runs the YAML parser, turning a parser panic into an error so
// hostile input can never crash the host.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: parser failed: %v", r)
		}
	}()
	return dec.Decode(n)
}

func (d *decoder) document(data []byte) *Manifest {
	if len(data) > MaxSize {
		u := tooLarge(d.file, int64(len(data)))
		d.addAt(yamlpos.Pos{Line: 1, Col: 1}, "", CodeTooLarge, u.What, u.Why, u.Fix)
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := decodeNode(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.addAt(yamlpos.Pos{Line: 1, Col: 1}, "", CodeEmpty, "the manifest is empty",
				"a plugin.yaml must describe the plugin", "add at least the required fields: name, version, kind, description, author, entry, sha256, api_versions")
		} else {
			d.syntaxError(err, data)
		}
		return nil
	}
	var extra yaml.Node
	if err := decodeNode(dec, &extra); err == nil {
		d.add(&extra, "", CodeMultiDoc, "the file holds more than one YAML document",
			"a plugin.yaml describes exactly one plugin", "remove the \"---\" separator and everything after it, or split the plugins into their own directories")
		return nil
	} else if !errors.Is(err, io.EOF) {
		d.syntaxError(err, data)
		return nil
	}
	if len(doc.Content) == 0 {
		d.addAt(yamlpos.Pos{Line: 1, Col: 1}, "", CodeEmpty, "the manifest is empty", "a plugin.yaml must describe the plugin",
			"add at least the required fields: name, version, kind, description, author, entry, sha256, api_versions")
		return nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		d.add(root, "", CodeEmpty, "the manifest is empty", "a plugin.yaml must describe the plugin",
			"add at least the required fields: name, version, kind, description, author, entry, sha256, api_versions")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		d.add(root, "", CodeWrongType, "the top level is "+describe(root)+", not a mapping of fields",
			"a plugin.yaml is a set of \"field: value\" lines", "write the manifest as fields, e.g. \"name: tool-fs\" on its own line")
		return nil
	}
	return d.manifest(root)
}

// ---- field tables -------------------------------------------------------

var topFields = []string{"name", "version", "kind", "description", "author", "entry", "sha256",
	"api_versions", "sandbox", "required_capabilities", "tags", "tools", "provider"}
var sandboxFields = []string{"template", "memory", "cpus", "pids", "timeout"}
var toolFields = []string{"name", "summary", "parameters", "output_mode", "lifetime", "paths"}
var providerFields = []string{"network"}

// renamed holds fields from older drafts with the fix to use now.
var renamed = map[string]string{
	"sandbox_template": `use "sandbox:" with "template:" under it, e.g. sandbox: {template: code-executor}`,
	"min_api_version":  `list every supported API version instead, e.g. api_versions: [1, 2]`,
	"runtime":          `remove it: plugins are executables started through go-plugin, "entry" names the binary`,
	"description":      `tools take a one-line "summary:" instead of "description:"`,
	"checksum":         `name the field "sha256"`,
	"schema":           `name the field "parameters"`,
	"input_schema":     `name the field "parameters"`,
}

func (d *decoder) unknownField(key *yaml.Node, field string, known []string) {
	name := key.Value
	fix := "remove it"
	if r, ok := renamed[name]; ok {
		fix = r
	} else if s := nearest.Name(name, known, 2); s != "" {
		fix = fmt.Sprintf("did you mean %q? Rename it, or remove it", s)
	}
	d.add(key, field, CodeUnknownField, fmt.Sprintf("unknown field %q", name),
		"known fields here are: "+strings.Join(known, ", "), fix)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// fields walks one mapping: keys must be plain strings, unique and known.
// It returns the value node of each known key and records its position.
func (d *decoder) fields(n *yaml.Node, path string, known []string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	seen := yamlpos.Seen{}
	_ = yamlpos.Pairs(n, path, func(p yamlpos.Pair) error {
		k, v := p.Key, p.Value
		if k.Kind == yaml.AliasNode || v.Kind == yaml.AliasNode {
			f := path
			if k.Kind == yaml.ScalarNode {
				f = p.Path
			}
			d.alias(v, f)
			return nil
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			d.add(k, path, CodeWrongType, "a field name is "+describe(k)+", not a name",
				"field names are plain words", "write the field name as a word followed by \":\"")
			return nil
		}
		if line, dup := seen.Repeat(k); dup {
			d.add(k, p.Path, CodeDuplicateField, fmt.Sprintf("field %q is given twice (first on line %d)", k.Value, line),
				"YAML allows each field once per mapping; a second one would silently win", "keep one of the two")
			return nil
		}
		if !contains(known, k.Value) {
			d.unknownField(k, p.Path, known)
			return nil
		}
		out[k.Value] = v
		d.pos[p.Path] = yamlpos.Field(k, v)
		return nil
	})
	return out
}

func (d *decoder) alias(n *yaml.Node, field string) {
	d.add(n, field, CodeYAMLAlias, "YAML anchors/aliases (\"*name\" or \"<<\") are not supported",
		"a manifest is read by people reviewing a plugin; every value must be written where it applies",
		"write the value out in full instead of referring to an anchor")
}

// describe names a node's type for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.ShortTag() {
	case "!!str":
		return fmt.Sprintf("a string (%q)", textsafe.Cap(n.Value, 60))
	case "!!int":
		return fmt.Sprintf("an integer (%s)", textsafe.Cap(n.Value, 60))
	case "!!float":
		return fmt.Sprintf("a number (%s)", textsafe.Cap(n.Value, 60))
	case "!!bool":
		return fmt.Sprintf("a boolean (%s)", textsafe.Cap(n.Value, 60))
	case "!!null":
		return "empty (null)"
	case "!!timestamp":
		return fmt.Sprintf("a date (%s)", textsafe.Cap(n.Value, 60))
	}
	return fmt.Sprintf("a value tagged %s", textsafe.Cap(n.Tag, 60))
}

// ---- typed accessors ----------------------------------------------------

// str reads a string scalar. ok is false (with an error recorded) if n is not
// one; a null value is reported as missing.
func (d *decoder) str(n *yaml.Node, field string) (string, bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return n.Value, true
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return "", false // reported by validate as missing or empty
	}
	fix := "write a string"
	if n.Kind == yaml.ScalarNode {
		fix = fmt.Sprintf("quote the value: %s: %q", lastKey(field), n.Value)
	}
	d.add(n, field, CodeWrongType, "expected a string, found "+describe(n), "", fix)
	return "", false
}

// text reads a scalar that may have been written unquoted as a number
// (version: 1.2 is YAML's float 1.2); the value is kept as written.
func (d *decoder) text(n *yaml.Node, field string) (string, bool) {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float":
			return n.Value, true
		}
	}
	return d.str(n, field)
}

func (d *decoder) noValue(n *yaml.Node, field string) {
	code := CodeMissingField
	if field == "sha256" {
		code = CodeMissingSHA256
	}
	d.add(n, field, code, "the field has no value", "", fmt.Sprintf("give %s a value or remove the line", lastKey(field)))
}

func lastKey(field string) string {
	if i := strings.LastIndexAny(field, ".]"); i >= 0 && i+1 < len(field) {
		return field[i+1:]
	}
	return field
}

func (d *decoder) integer(n *yaml.Node, field, fix string) (int64, bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		var v int64
		if err := n.Decode(&v); err == nil {
			return v, true
		}
		d.add(n, field, CodeBadLimit, fmt.Sprintf("%s is too large", textsafe.Cap(n.Value, 60)), "", fix)
		return 0, false
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		d.noValue(n, field)
		return 0, false
	}
	d.add(n, field, CodeWrongType, "expected a whole number, found "+describe(n), "", fix)
	return 0, false
}

func (d *decoder) list(n *yaml.Node, field, fix string) ([]*yaml.Node, bool) {
	if n.Kind == yaml.SequenceNode {
		return n.Content, true
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, true
	}
	d.add(n, field, CodeWrongType, "expected a list, found "+describe(n), "", fix)
	return nil, false
}

func (d *decoder) strList(n *yaml.Node, field, fix string) []string {
	items, ok := d.list(n, field, fix)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		if it.Kind == yaml.AliasNode {
			d.alias(it, f)
			continue
		}
		d.pos[f] = yamlpos.Of(it)
		if s, ok := d.str(it, f); ok {
			out = append(out, s)
		}
	}
	return out
}

func (d *decoder) mapping(n *yaml.Node, field, fix string) bool {
	if n.Kind == yaml.MappingNode {
		return true
	}
	d.add(n, field, CodeWrongType, "expected a mapping of fields, found "+describe(n), "", fix)
	return false
}

// ---- the manifest -------------------------------------------------------

func (d *decoder) manifest(root *yaml.Node) *Manifest {
	m := &Manifest{pos: d.pos, bad: d.bad}
	d.pos[""] = yamlpos.Of(root)
	f := d.fields(root, "", topFields)
	required := func(key string) (*yaml.Node, bool) {
		// Absence is reported by validate, which also catches "".
		n, ok := f[key]
		return n, ok
	}
	if n, ok := required("name"); ok {
		m.Name, _ = d.str(n, "name")
	}
	if n, ok := required("version"); ok {
		m.Version, _ = d.text(n, "version")
	}
	if n, ok := required("kind"); ok {
		m.Kind, _ = d.str(n, "kind")
	}
	if n, ok := required("description"); ok {
		m.Description, _ = d.str(n, "description")
	}
	if n, ok := required("author"); ok {
		m.Author, _ = d.str(n, "author")
	}
	if n, ok := required("entry"); ok {
		m.Entry, _ = d.str(n, "entry")
	}
	if n, ok := required("sha256"); ok {
		m.SHA256, _ = d.str(n, "sha256")
	}
	if n, ok := required("api_versions"); ok {
		items, ok := d.list(n, "api_versions", "list the kernel API versions the plugin speaks, e.g. api_versions: [1, 2]")
		if ok {
			m.APIVersions = []int{}
		}
		for i, it := range items {
			field := fmt.Sprintf("api_versions[%d]", i)
			if it.Kind == yaml.AliasNode {
				d.alias(it, field)
				continue
			}
			d.pos[field] = yamlpos.Of(it)
			v, ok := d.integer(it, field, "list whole numbers, e.g. api_versions: [1, 2]")
			if !ok {
				continue
			}
			if v < 1 || v > 1<<20 {
				d.add(it, field, CodeBadAPIVersions, fmt.Sprintf("API version %d is out of range", v),
					"API versions are small positive integers counted from 1", "list supported versions, e.g. api_versions: [1, 2]")
				continue
			}
			m.APIVersions = append(m.APIVersions, int(v))
		}
	}
	if n, ok := f["sandbox"]; ok && d.mapping(n, "sandbox", "write e.g. sandbox: {template: code-executor}") {
		d.sandbox(n, m)
	}
	if n, ok := f["required_capabilities"]; ok {
		m.RequiredCapabilities = d.strList(n, "required_capabilities", "list capabilities, e.g. required_capabilities: [fs.read]")
	}
	if n, ok := f["tags"]; ok {
		m.Tags = d.strList(n, "tags", "list tags, e.g. tags: [core_plugin]")
	}
	if n, ok := f["tools"]; ok {
		items, ok := d.list(n, "tools", "list the tools, each with name, summary and parameters")
		if ok {
			m.Tools = []Tool{}
		}
		for i, it := range items {
			field := fmt.Sprintf("tools[%d]", i)
			if it.Kind == yaml.AliasNode {
				d.alias(it, field)
				continue
			}
			d.pos[field] = yamlpos.Of(it)
			if d.mapping(it, field, "write each tool as fields: name, summary, parameters") {
				m.Tools = append(m.Tools, d.tool(it, field))
			}
		}
	}
	if n, ok := f["provider"]; ok && d.mapping(n, "provider", "write e.g. provider: {network: [api.openai.com:443]}") {
		p := &Provider{}
		pf := d.fields(n, "provider", providerFields)
		if nn, ok := pf["network"]; ok {
			p.Network = d.strList(nn, "provider.network", "list host[:port] entries, e.g. network: [api.openai.com:443]")
		}
		m.Provider = p
	}
	return m
}

var example = map[string]string{
	"name": "tool-fs", "version": `"1.0.0"`, "kind": "tool", "description": `"What the plugin does, in one line"`,
	"author": `"Your Name"`, "entry": "tool-fs", "api_versions": "[1, 2]",
	"summary": `"What the tool does, in one line"`, "parameters": "{type: object, properties: {}}",
}

func (d *decoder) sandbox(n *yaml.Node, m *Manifest) {
	sf := d.fields(n, "sandbox", sandboxFields)
	if v, ok := sf["template"]; ok {
		m.Sandbox.Template, _ = d.str(v, "sandbox.template")
	}
	if v, ok := sf["memory"]; ok {
		m.Sandbox.MemoryBytes = d.memory(v, "sandbox.memory")
	}
	if v, ok := sf["cpus"]; ok {
		if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!float" || v.ShortTag() == "!!int") {
			c, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64)
			switch {
			case err != nil || c != c:
				d.add(v, "sandbox.cpus", CodeBadLimit, fmt.Sprintf("%q is not a CPU count", v.Value), "", "write a decimal number of CPUs, e.g. cpus: 0.5")
			case c <= 0 || c > maxCPUs:
				d.add(v, "sandbox.cpus", CodeBadLimit, fmt.Sprintf("cpus %s is out of range", v.Value),
					fmt.Sprintf("a sandbox gets more than 0 and at most %d CPUs", maxCPUs), "write e.g. cpus: 0.5, or remove the line to use the template's limit")
			default:
				m.Sandbox.CPUs = c
			}
		} else {
			d.add(v, "sandbox.cpus", CodeWrongType, "expected a number of CPUs, found "+describe(v), "", "write a decimal number, e.g. cpus: 0.5")
		}
	}
	if v, ok := sf["pids"]; ok {
		if p, ok := d.integer(v, "sandbox.pids", "write a whole number of processes, e.g. pids: 50"); ok {
			if p < 1 || p > maxPids {
				d.add(v, "sandbox.pids", CodeBadLimit, fmt.Sprintf("pids %d is out of range", p),
					fmt.Sprintf("a sandbox needs at least 1 process and at most %d", maxPids), "write e.g. pids: 50, or remove the line to use the template's limit")
			} else {
				m.Sandbox.Pids = int(p)
			}
		}
	}
	if v, ok := sf["timeout"]; ok {
		m.Sandbox.Timeout = d.timeout(v, "sandbox.timeout")
	}
}

func (d *decoder) tool(n *yaml.Node, path string) Tool {
	var t Tool
	tf := d.fields(n, path, toolFields)
	req := func(key string) (*yaml.Node, bool) {
		v, ok := tf[key]
		return v, ok
	}
	if v, ok := req("name"); ok {
		t.Name, _ = d.str(v, yamlpos.Join(path, "name"))
	}
	if v, ok := req("summary"); ok {
		t.Summary, _ = d.str(v, yamlpos.Join(path, "summary"))
	}
	if v, ok := req("parameters"); ok {
		t.ParametersJSON = d.parameters(v, yamlpos.Join(path, "parameters"))
	}
	if v, ok := tf["output_mode"]; ok {
		t.OutputMode, _ = d.str(v, yamlpos.Join(path, "output_mode"))
	}
	if v, ok := tf["lifetime"]; ok {
		t.Lifetime, _ = d.str(v, yamlpos.Join(path, "lifetime"))
	}
	if v, ok := tf["paths"]; ok {
		t.Paths = d.paths(v, yamlpos.Join(path, "paths"))
	}
	return t
}
