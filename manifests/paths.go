package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/lib/yamlpos"
)

// Path access modes: whether a tool reads or writes the project path an
// argument names.
const (
	AccessRead  = "read"
	AccessWrite = "write"
)

// PathDecl declares that one argument of a tool is a project path. The
// kernel's router judges every such path with the policy before the call
// (as the fs.* syscall Syscall, by this plugin, with its registry tags), so
// a tool's manifest must declare every argument that names a project file
// or directory. Written in plugin.yaml under the tool:
//
//	paths:
//	  - {arg: path, access: read}
//	  - {arg: files[].path, access: write}
//	  - {arg: dir, access: read, syscall: fs.list, default: "."}
type PathDecl struct {
	// Arg selects the argument: property names joined by ".", a "[]"
	// suffix meaning "every element of this list" (e.g. "paths[]",
	// "edits[].path").
	Arg string
	// Access is AccessRead or AccessWrite.
	Access string
	// Syscall is the fs.* syscall the policy sees for this path:
	// fs.read (default), fs.list, fs.exists or fs.stat for reads; fs.write
	// (default) or fs.delete for writes.
	Syscall string
	// Default is the path judged when the argument is absent ("." = the
	// project root). Without it, an absent argument names no path.
	Default string
	// HasDefault distinguishes `default: ""` from no default.
	HasDefault bool
	// Format FormatPatch says the argument is patch text (a `*** Begin
	// Patch` envelope or a unified diff), not a path: every file it adds,
	// updates, deletes or moves to is a path of the call.
	Format string
}

// FormatPatch is the PathDecl format of a patch-text argument.
const FormatPatch = "patch"

// Write reports whether the declaration is a write.
func (d PathDecl) Write() bool { return d.Access == AccessWrite }

// ReadSyscalls and WriteSyscalls are the syscalls a path declaration may
// name for each access mode; the first is the default.
var (
	ReadSyscalls  = []string{"fs.read", "fs.list", "fs.exists", "fs.stat"}
	WriteSyscalls = []string{"fs.write", "fs.delete"}
)

var pathDeclFields = []string{"arg", "access", "syscall", "default", "format"}

var argSegRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\[\])?$`)

// decodePaths reads a tool's `paths:` list.
func (d *decoder) paths(n *yaml.Node, field string) []PathDecl {
	items, ok := d.list(n, field, "list the path arguments, e.g. paths: [{arg: path, access: read}]")
	if !ok {
		return nil
	}
	out := []PathDecl{}
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		if it.Kind == yaml.AliasNode {
			d.alias(it, f)
			continue
		}
		d.pos[f] = yamlpos.Of(it)
		if !d.mapping(it, f, "write each path argument as {arg: NAME, access: read|write}") {
			continue
		}
		var pd PathDecl
		pf := d.fields(it, f, pathDeclFields)
		if v, ok := pf["arg"]; ok {
			pd.Arg, _ = d.str(v, yamlpos.Join(f, "arg"))
		}
		if v, ok := pf["access"]; ok {
			pd.Access, _ = d.str(v, yamlpos.Join(f, "access"))
		}
		if v, ok := pf["syscall"]; ok {
			pd.Syscall, _ = d.str(v, yamlpos.Join(f, "syscall"))
		}
		if v, ok := pf["default"]; ok {
			pd.Default, pd.HasDefault = d.str(v, yamlpos.Join(f, "default"))
		}
		if v, ok := pf["format"]; ok {
			pd.Format, _ = d.str(v, yamlpos.Join(f, "format"))
		}
		out = append(out, pd)
	}
	return out
}

// checkPaths validates tool i's path declarations against its schema and
// the manifest's required_capabilities.
func (c *checker) checkPaths(m *Manifest, i int) {
	t := &m.Tools[i]
	var props map[string]any
	if len(t.ParametersJSON) > 0 {
		var doc map[string]any
		if json.Unmarshal(t.ParametersJSON, &doc) == nil {
			props, _ = doc["properties"].(map[string]any)
		}
	}
	seen := map[string]int{}
	for j := range t.Paths {
		pd := &t.Paths[j]
		base := fmt.Sprintf("tools[%d].paths[%d]", i, j)
		switch {
		case pd.Arg == "":
			c.add(base+".arg", CodeMissingField, "the path declaration names no argument", "",
				"add arg: NAME, the argument that holds the path (e.g. arg: path)")
		case !validArg(pd.Arg):
			c.add(base+".arg", CodeBadPathDecl, fmt.Sprintf("arg %q is not an argument selector", textsafe.Cap(pd.Arg, 60)),
				"a selector is property names joined by \".\", with \"[]\" after a list", `write e.g. "path", "paths[]" or "edits[].path"`)
		default:
			if k, dup := seen[pd.Arg]; dup {
				c.add(base+".arg", CodeDuplicateValue, fmt.Sprintf("argument %q is declared twice (also paths[%d])", pd.Arg, k), "", "declare each path argument once")
			}
			seen[pd.Arg] = j
			first := strings.TrimSuffix(strings.SplitN(pd.Arg, ".", 2)[0], "[]")
			if props != nil {
				if _, ok := props[first]; !ok {
					c.add(base+".arg", CodeBadPathDecl, fmt.Sprintf("argument %q is not a property of the tool's parameters", first),
						"an undeclared name would leave the real path argument unchecked",
						"name a property listed under parameters.properties")
				}
			}
		}
		if pd.Format != "" && (pd.Format != FormatPatch || pd.Access != AccessWrite) {
			c.add(base+".format", CodeBadPathDecl, fmt.Sprintf("format %q is not known for access %s", textsafe.Cap(pd.Format, 60), pd.Access),
				"the only format is patch, for a write argument holding patch text", "write format: patch with access: write, or drop format")
		}
		switch pd.Access {
		case "":
			c.add(base+".access", CodeMissingField, "the path declaration has no access mode", "", "add access: read or access: write")
			continue
		case AccessRead, AccessWrite:
		default:
			c.add(base+".access", CodeBadPathDecl, fmt.Sprintf("access %q is not known", textsafe.Cap(pd.Access, 60)), "", "use read or write")
			continue
		}
		allowed := ReadSyscalls
		if pd.Access == AccessWrite {
			allowed = WriteSyscalls
		}
		if pd.Syscall != "" && !slices.Contains(allowed, pd.Syscall) {
			c.add(base+".syscall", CodeBadPathDecl, fmt.Sprintf("syscall %q is not a %s syscall", textsafe.Cap(pd.Syscall, 60), pd.Access),
				"the policy judges the path as this syscall; it must match the access mode", "use one of: "+strings.Join(allowed, ", "))
			continue
		}
		if pd.Syscall == "" {
			pd.Syscall = allowed[0]
		}
		if !slices.Contains(m.RequiredCapabilities, pd.Syscall) {
			c.add(base, CodeCapabilityUndeclared, fmt.Sprintf("tool %q touches paths as %s, which required_capabilities does not list", t.Name, pd.Syscall),
				"the kernel refuses every syscall a plugin did not declare", fmt.Sprintf("add %s to required_capabilities", pd.Syscall))
		}
	}
}

func validArg(s string) bool {
	for _, seg := range strings.Split(s, ".") {
		if !argSegRE.MatchString(seg) {
			return false
		}
	}
	return true
}

// PathArg is one project path found in a call's arguments.
type PathArg struct {
	// Arg is where it was found, with list indexes ("edits[2].path").
	Arg     string
	Value   string
	Syscall string
	Write   bool
	// Defaulted marks a value taken from the declaration's default.
	Defaulted bool
}

// PathArgs returns every project path in argsJSON according to the tool's
// path declarations, in declaration order. The arguments must already have
// passed ValidateArgs; a declared argument that is present but not a string
// (or a list of them, for "[]") is an error, so a path can never slip past
// the policy by having an unexpected shape.
func (t Tool) PathArgs(argsJSON []byte) ([]PathArg, error) {
	if len(t.Paths) == 0 {
		return nil, nil
	}
	if len(bytes.TrimSpace(argsJSON)) == 0 {
		argsJSON = []byte("{}")
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(argsJSON))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, uerr.Wrap(err, CodeToolArgsInvalid, fmt.Sprintf("arguments for tool %q are not valid JSON", t.Name), err.Error(),
			"send the arguments as one JSON object")
	}
	var out []PathArg
	for _, pd := range t.Paths {
		syscall := pd.Syscall
		if syscall == "" {
			syscall = ReadSyscalls[0]
			if pd.Write() {
				syscall = WriteSyscalls[0]
			}
		}
		found, err := selectArg(doc, strings.Split(pd.Arg, "."), "")
		if err != nil {
			return nil, uerr.New(CodeToolArgsInvalid, fmt.Sprintf("arguments for tool %q: %s", t.Name, err.Error()),
				fmt.Sprintf("argument %q is declared as a project path", pd.Arg), "send the path as a string relative to the project root")
		}
		if len(found) == 0 && pd.HasDefault {
			out = append(out, PathArg{Arg: pd.Arg, Value: pd.Default, Syscall: syscall, Write: pd.Write(), Defaulted: true})
		}
		for _, f := range found {
			if pd.Format != FormatPatch {
				out = append(out, PathArg{Arg: f[0], Value: f[1], Syscall: syscall, Write: pd.Write()})
				continue
			}
			fps, err := patch.ParseMulti(f[1])
			if err != nil {
				return nil, uerr.Wrap(err, CodeToolArgsInvalid, fmt.Sprintf("arguments for tool %q: %s is not a patch", t.Name, f[0]), err.Error(),
					"send a '*** Begin Patch' ... '*** End Patch' envelope or a unified diff with '--- a/PATH' / '+++ b/PATH' headers")
			}
			for _, p := range patch.Paths(fps) {
				out = append(out, PathArg{Arg: f[0], Value: p, Syscall: syscall, Write: true})
			}
		}
	}
	return out, nil
}

// selectArg walks segs through v and returns (location, value) pairs.
// Absent properties yield nothing; present values of the wrong shape are an
// error.
func selectArg(v any, segs []string, at string) ([][2]string, error) {
	if len(segs) == 0 {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s is %s, not a string", at, jsonKind(v))
		}
		return [][2]string{{at, s}}, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is %s, not an object", orRoot(at), jsonKind(v))
	}
	seg := segs[0]
	list := strings.HasSuffix(seg, "[]")
	name := strings.TrimSuffix(seg, "[]")
	child, present := obj[name]
	if !present || child == nil {
		return nil, nil
	}
	loc := name
	if at != "" {
		loc = at + "." + name
	}
	if !list {
		return selectArg(child, segs[1:], loc)
	}
	arr, ok := child.([]any)
	if !ok {
		return nil, fmt.Errorf("%s is %s, not a list", loc, jsonKind(child))
	}
	var out [][2]string
	for i, el := range arr {
		got, err := selectArg(el, segs[1:], fmt.Sprintf("%s[%d]", loc, i))
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

func orRoot(at string) string {
	if at == "" {
		return "the arguments"
	}
	return at
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
