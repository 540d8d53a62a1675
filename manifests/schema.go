package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/lib/yamlpos"
)

// parameters converts a tool's YAML parameters into canonical JSON, recording
// the position of every nested value so schema errors can name their line.
func (d *decoder) parameters(n *yaml.Node, field string) []byte {
	if n.Kind != yaml.MappingNode {
		d.add(n, field, CodeBadSchema, "parameters must be a JSON Schema object, found "+describe(n), "",
			"write e.g. parameters: {type: object, properties: {path: {type: string}}, required: [path]}")
		return nil
	}
	before := len(d.errs)
	v := d.jsonValue(n, field)
	if len(d.errs) > before {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil { // unreachable: jsonValue only builds JSON-safe values
		d.add(n, field, CodeBadSchema, "parameters cannot be written as JSON: "+err.Error(), "", "use only strings, numbers, booleans, null, lists and mappings")
		return nil
	}
	return b
}

// jsonValue converts one node; the caller has recorded its position.
func (d *decoder) jsonValue(n *yaml.Node, field string) any {
	switch n.Kind {
	case yaml.AliasNode:
		d.alias(n, field)
		return nil
	case yaml.MappingNode:
		obj := make(map[string]any, len(n.Content)/2)
		first := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				if k.Kind == yaml.AliasNode {
					d.alias(k, field)
				} else {
					d.add(k, field, CodeBadSchema, "a JSON Schema key is "+describe(k)+", not a string", "JSON object keys are strings",
						fmt.Sprintf("quote the key: %q", k.Value))
				}
				continue
			}
			f := yamlpos.Join(field, k.Value)
			if line, dup := first[k.Value]; dup {
				d.add(k, f, CodeDuplicateField, fmt.Sprintf("key %q is given twice (first on line %d)", k.Value, line), "", "keep one of the two")
				continue
			}
			first[k.Value] = k.Line
			obj[k.Value] = d.jsonValue(v, f)
			d.pos[f] = yamlpos.Field(k, v)
		}
		return obj
	case yaml.SequenceNode:
		arr := make([]any, 0, len(n.Content))
		for i, it := range n.Content {
			f := fmt.Sprintf("%s[%d]", field, i)
			d.pos[f] = yamlpos.Of(it)
			arr = append(arr, d.jsonValue(it, f))
		}
		return arr
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str", "!!timestamp":
			return n.Value
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err == nil {
				return b
			}
		case "!!int":
			var i int64
			if err := n.Decode(&i); err == nil {
				return i
			}
			var u uint64
			if err := n.Decode(&u); err == nil {
				return u
			}
		case "!!float":
			var f float64
			if err := n.Decode(&f); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				return f
			}
			d.add(n, field, CodeBadSchema, fmt.Sprintf("%s is not a JSON number", textsafe.Cap(n.Value, 60)), "JSON has no infinity or NaN", "use a finite number")
			return nil
		}
	}
	d.add(n, field, CodeBadSchema, fmt.Sprintf("%s cannot be expressed in JSON", describe(n)), "", "use only strings, numbers, booleans, null, lists and mappings")
	return nil
}

func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	return c
}

// refuseLoader stops the schema compiler from reading files or the network:
// a manifest's schema must be self-contained.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %q is not allowed", url)
}

// compileSchema compiles a tool's parameters schema. It returns the schema or
// a message, the JSON pointer inside the schema it concerns, and a fix.
// c is shared by the tools of one manifest so the metaschema is loaded once.
// Each tool is its own resource, named by its index (names may be invalid).
func compileSchema(c *jsonschema.Compiler, index int, paramsJSON []byte) (*jsonschema.Schema, string, string, string) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(paramsJSON))
	if err != nil {
		return nil, "parameters are not valid JSON: " + err.Error(), "", "write the schema as a YAML mapping"
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, "parameters must be a JSON Schema object", "", "write e.g. parameters: {type: object, properties: {}}"
	}
	if t, ok := obj["type"].(string); !ok || t != "object" {
		return nil, `the top-level "type" of the parameters schema must be "object"`, "/type",
			"add \"type: object\" directly under parameters: tool arguments are always a JSON object"
	}
	url := fmt.Sprintf("urn:fluffy:tools:%d", index)
	if err := c.AddResource(url, doc); err != nil {
		return nil, "parameters cannot be used as a schema: " + err.Error(), "", "check the schema's $id"
	}
	sch, err := c.Compile(url)
	if err != nil {
		var sve *jsonschema.SchemaValidationError
		if errors.As(err, &sve) {
			var ve *jsonschema.ValidationError
			if errors.As(sve.Err, &ve) {
				ptr, msg := firstLeaf(ve)
				return nil, "parameters are not a valid JSON Schema: " + msg, ptr,
					"correct the schema at that place (see https://json-schema.org/understanding-json-schema/)"
			}
		}
		msg := err.Error()
		fix := "correct the schema (see https://json-schema.org/understanding-json-schema/)"
		if strings.Contains(msg, "external reference") || strings.Contains(msg, "no URLLoader") {
			fix = "inline the referenced schema under \"$defs\" and refer to it as \"#/$defs/<name>\"; schemas are never fetched"
		}
		return nil, "parameters are not a valid JSON Schema: " + msg, "", fix
	}
	return sch, "", "", ""
}

// firstLeaf returns the instance pointer and message of the deepest first
// cause of a schema validation error.
func firstLeaf(ve *jsonschema.ValidationError) (string, string) {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return pointer(ve.InstanceLocation), ve.ErrorKind.LocalizedString(newPrinter())
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// pointerToField turns a JSON pointer inside tools[i].parameters into the
// dotted field path used in positions ("/properties/path/type" →
// "tools[0].parameters.properties.path.type").
func pointerToField(base, ptr string, doc any) string {
	if ptr == "" {
		return base
	}
	field := base
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return field
			}
			field = fmt.Sprintf("%s[%d]", field, i)
			cur = c[i]
		case map[string]any:
			field = yamlpos.Join(field, tok)
			cur = c[tok]
		default:
			return field
		}
	}
	return field
}

// ValidateArgs checks a tool call's arguments (a JSON object) against the
// tool's parameters schema. Empty args count as {}. The error is a
// *uerr.Error with code TOOL_ARGS_INVALID naming every failing JSON pointer.
func (t Tool) ValidateArgs(argsJSON []byte) error {
	if t.schema == nil {
		return uerr.New(CodeToolSchemaMissing, fmt.Sprintf("tool %q has no compiled parameters schema", t.Name),
			"a Tool is only usable for validation when it comes from Load, Parse or Manifest.Validate",
			"obtain the tool from a loaded manifest")
	}
	if len(bytes.TrimSpace(argsJSON)) == 0 {
		argsJSON = []byte("{}")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(argsJSON))
	if err != nil {
		return uerr.Wrap(err, CodeToolArgsInvalid, fmt.Sprintf("arguments for tool %q are not valid JSON", t.Name), err.Error(),
			"send the arguments as one JSON object, e.g. {\"path\": \"README.md\"}")
	}
	err = t.schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return uerr.Wrap(err, CodeToolArgsInvalid, fmt.Sprintf("arguments for tool %q were rejected", t.Name), err.Error(),
			"send arguments that match the tool's parameters schema")
	}
	problems := leaves(ve)
	fix := "correct the argument at each JSON pointer named above"
	if len(t.ParametersJSON) <= 1000 {
		fix += "; the parameters schema is " + string(t.ParametersJSON)
	} else {
		fix += " so that it matches the tool's parameters schema"
	}
	return uerr.Wrap(err, CodeToolArgsInvalid,
		fmt.Sprintf("arguments for tool %q do not match its parameters schema", t.Name),
		strings.Join(problems, "; "), fix)
}

// leaves flattens a validation error into "at /ptr: message" lines, one per
// failing location, sorted and de-duplicated.
func leaves(ve *jsonschema.ValidationError) []string {
	seen := map[string]bool{}
	p := newPrinter()
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			ptr := pointer(e.InstanceLocation)
			if ptr == "" {
				ptr = "/"
			}
			s := fmt.Sprintf("at %s: %s", ptr, e.ErrorKind.LocalizedString(p))
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(out)
	return out
}

func newPrinter() *message.Printer { return message.NewPrinter(language.English) }

func jsonUnmarshal(b []byte, v *any) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	*v = doc
	return err
}
