package manifests

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fluffy-waffle/fluffy/lib/nearest"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/yamlpos"

	"github.com/Masterminds/semver/v3"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ValidTag reports whether tag is a well-formed tag (a lowercase word).
func ValidTag(tag string) bool { return tagRE.MatchString(tag) }

var (
	nameRE       = regexp.MustCompile(`^[a-z][a-z0-9-]{1,62}$`)
	sha256RE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	capabilityRE = regexp.MustCompile(`^[a-z]+(\.[a-z_]+)+$`)
	tagRE        = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	toolNameRE   = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
	hostLabelRE  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// MaxTextLen is the longest description, author or tool summary, in
// characters.
const MaxTextLen = 200

// maxTagLen keeps tags reasonable; a tag is a label, not prose.
const maxTagLen = 64

func applyDefaults(m *Manifest) {
	if m.Sandbox.Template == "" {
		m.Sandbox.Template = DefaultTemplate(m.Kind)
	}
	for i := range m.Tools {
		if m.Tools[i].OutputMode == "" {
			m.Tools[i].OutputMode = OutputPatch
		}
		if m.Tools[i].Lifetime == "" {
			m.Tools[i].Lifetime = LifetimeSession
		}
	}
}

// Validate re-checks every rule on m and compiles any tool schema not yet
// compiled (so a Manifest built in code gets working Tool.ValidateArgs).
// Empty optional fields count as their defaults. It returns nil or a
// *ValidationError; positions are known only for a parsed manifest.
func (m *Manifest) Validate() error {
	errs := m.validate()
	if len(errs) == 0 {
		return nil
	}
	file := m.file
	if file == "" {
		file = m.Path
	}
	if file == "" {
		file = FileName
	}
	for _, e := range errs {
		e.File = file
	}
	return newValidationError(file, errs)
}

// at finds the position of a field, falling back to its nearest recorded
// parent.
func (m *Manifest) at(field string) yamlpos.Pos {
	for f := field; f != ""; {
		if p, ok := m.pos[f]; ok {
			return p
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	if p, ok := m.pos[""]; ok { // the top-level mapping
		return p
	}
	return yamlpos.Pos{Line: 1, Col: 1}
}

type checker struct {
	m    *Manifest
	errs []*FieldError
}

// reported says whether the decoder already complained about field, one of
// its parents or one of its children.
func (c *checker) reported(field string) bool {
	for k := range c.m.bad {
		if k == field || under(field, k) || under(k, field) {
			return true
		}
	}
	return false
}

func under(child, parent string) bool {
	return parent == "" || strings.HasPrefix(child, parent+".") || strings.HasPrefix(child, parent+"[")
}

func (c *checker) add(field, code, what, why, fix string) {
	if c.reported(field) {
		return
	}
	p := yamlpos.Pos{}
	if c.m.pos != nil {
		p = c.m.at(field)
	}
	c.errs = append(c.errs, &FieldError{File: c.m.file, Line: p.Line, Column: p.Col, Field: field,
		Code: code, What: what, Why: why, Fix: fix})
}

func (c *checker) text(field, v string, required bool) {
	switch {
	case strings.TrimSpace(v) == "":
		if required {
			c.missing(field)
		}
	case !utf8.ValidString(v):
		c.add(field, CodeBadText, "the text is not valid UTF-8", "", "save the file as UTF-8")
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		c.add(field, CodeBadText, "the text spans several lines or holds control characters",
			"it is shown on one line in lists and prompts", "write it as a single line")
	case utf8.RuneCountInString(v) > MaxTextLen:
		c.add(field, CodeBadText, fmt.Sprintf("the text is %d characters long", utf8.RuneCountInString(v)),
			fmt.Sprintf("it is shown on one line in lists and prompts, which allow %d characters", MaxTextLen),
			fmt.Sprintf("shorten it to at most %d characters; put details in the plugin's README", MaxTextLen))
	}
}

func (c *checker) missing(field string) {
	key := lastKey(field)
	what := fmt.Sprintf("required field %q is missing or empty", key)
	if key == "sha256" {
		c.add(field, CodeMissingSHA256, what, "the kernel refuses to start a binary whose checksum it cannot compare",
			`add the sha256 of the entry binary: run "stamp-manifest -in plugin.yaml -bin <entry> -out plugin.yaml" (make build does this), or write sha256: "<output of sha256sum <entry>>"`)
		return
	}
	c.add(field, CodeMissingField, what, "", fmt.Sprintf("add a line like: %s: %s", key, example[key]))
}

func (m *Manifest) validate() []*FieldError {
	c := &checker{m: m}
	for _, f := range []struct{ name, v string }{{"name", m.Name}, {"version", m.Version}, {"kind", m.Kind}, {"entry", m.Entry}, {"sha256", m.SHA256}} {
		if f.v == "" {
			c.missing(f.name)
		}
	}
	if m.Name != "" && !nameRE.MatchString(m.Name) {
		c.add("name", CodeBadName, fmt.Sprintf("plugin name %q is not allowed", textsafe.Cap(m.Name, 60)),
			"plugin names are used as directory names and policy keys",
			`use 2-63 characters: a lowercase letter, then lowercase letters, digits or "-", e.g. "tool-fs"`)
	}
	if m.Version != "" {
		v, err := semver.StrictNewVersion(m.Version)
		if err != nil {
			c.add("version", CodeBadSemver, fmt.Sprintf("version %q is not a strict semantic version", textsafe.Cap(m.Version, 60)),
				err.Error(), `write MAJOR.MINOR.PATCH without a "v" prefix and quote it, e.g. version: "1.2.0"`)
		}
		m.SemVer = v
	}
	if m.Kind != "" && DefaultTemplate(m.Kind) == "" {
		fix := "use one of: " + strings.Join(Kinds(), ", ")
		if s := nearest.Name(m.Kind, Kinds(), 2); s != "" {
			fix = fmt.Sprintf("did you mean %q? Use one of: %s", s, strings.Join(Kinds(), ", "))
		}
		c.add("kind", CodeBadKind, fmt.Sprintf("kind %q is not a plugin kind", textsafe.Cap(m.Kind, 60)), "", fix)
	}
	c.text("description", m.Description, true)
	c.text("author", m.Author, true)
	c.entry(m.Entry)
	if m.SHA256 != "" && !sha256RE.MatchString(m.SHA256) {
		fix := "write the 64 hex digits printed by sha256sum, or run stamp-manifest"
		if sha256RE.MatchString(strings.ToLower(m.SHA256)) {
			fix = "write the digits in lowercase"
		}
		c.add("sha256", CodeBadSHA256, fmt.Sprintf("sha256 %q is not 64 lowercase hex digits", textsafe.Cap(m.SHA256, 60)), "", fix)
	}
	c.apiVersions(m.APIVersions)
	c.sandbox(m)
	c.uniqueList("required_capabilities", m.RequiredCapabilities, capabilityRE, CodeBadCapability,
		"a capability is lowercase dotted words, e.g. fs.read or net.connect", `write e.g. "fs.read"`)
	for i, v := range m.RequiredCapabilities {
		if capabilityRE.MatchString(v) && !slices.Contains(KnownCapabilities, v) {
			c.add(fmt.Sprintf("required_capabilities[%d]", i), CodeUnknownCapability, fmt.Sprintf("%q is not a capability the kernel grants", textsafe.Cap(v, 60)),
				"a listed capability must mean something the kernel enforces; the policy, not this list, decides a tool's own calls",
				"remove it; the capabilities are "+strings.Join(KnownCapabilities, ", "))
		}
	}
	c.uniqueList("tags", m.Tags, tagRE, CodeBadTag,
		"a tag is a lowercase word: letters, digits, \"_\" or \"-\", starting with a letter", `write e.g. "core_plugin"`)
	c.tools(m)
	c.provider(m)
	return c.errs
}

func (c *checker) entry(e string) {
	const why = "entry is resolved inside the plugin directory, which is all that is mounted into the sandbox"
	fix := fmt.Sprintf("make entry a path inside the plugin directory, e.g. %q", "bin/"+exampleName(c.m.Name))
	switch {
	case e == "":
		return // missing is reported by the decoder; empty string below
	case strings.ContainsRune(e, '\\'):
		c.add("entry", CodeEntryInvalid, fmt.Sprintf("path %q contains a backslash", textsafe.Cap(e, 60)), "entry uses \"/\" as separator on every platform",
			fmt.Sprintf("write it with \"/\", e.g. %q", strings.ReplaceAll(e, `\`, "/")))
	case strings.HasPrefix(e, "/") || len(e) >= 2 && e[1] == ':' && unicode.IsLetter(rune(e[0])):
		c.add("entry", CodeEntryAbsolute, fmt.Sprintf("path %q is absolute", textsafe.Cap(e, 60)), why, fix)
	case containsDotDot(e):
		c.add("entry", CodeEntryEscapes, fmt.Sprintf("path %q leaves the plugin directory", textsafe.Cap(e, 60)), why, fix)
	case strings.IndexFunc(e, unicode.IsControl) >= 0 || !utf8.ValidString(e):
		c.add("entry", CodeEntryInvalid, fmt.Sprintf("path %q contains control characters", textsafe.Cap(e, 60)), "", fix)
	case e == "." || strings.HasSuffix(e, "/") || strings.HasSuffix(e, "/."):
		c.add("entry", CodeEntryInvalid, fmt.Sprintf("path %q names a directory, not a file", textsafe.Cap(e, 60)), "entry is the plugin's executable", fix)
	}
}

func exampleName(n string) string {
	if n == "" || !nameRE.MatchString(n) {
		return "my-plugin"
	}
	return n
}

func containsDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

func (c *checker) apiVersions(vs []int) {
	if vs == nil {
		c.missing("api_versions")
		return
	}
	if len(vs) == 0 {
		c.add("api_versions", CodeBadAPIVersions, "api_versions is empty", "the kernel must know which API versions the plugin speaks",
			"list at least one version, e.g. api_versions: [1, 2]")
		return
	}
	seen := map[int]int{}
	for i, v := range vs {
		f := fmt.Sprintf("api_versions[%d]", i)
		if v < 1 {
			c.add(f, CodeBadAPIVersions, fmt.Sprintf("API version %d is not positive", v), "API versions are counted from 1", "list e.g. api_versions: [1, 2]")
			continue
		}
		if j, dup := seen[v]; dup {
			c.add(f, CodeBadAPIVersions, fmt.Sprintf("API version %d is listed twice (also item %d)", v, j), "", "list each version once")
			continue
		}
		seen[v] = i
	}
}

func (c *checker) sandbox(m *Manifest) {
	s := m.Sandbox
	t := s.Template
	if t == "" {
		t = DefaultTemplate(m.Kind)
	}
	known := false
	for _, k := range Templates() {
		known = known || k == t
	}
	switch {
	case t == "":
		// kind is missing or wrong: already reported
	case !known:
		fix := "use one of: " + strings.Join(Templates(), ", ")
		if sug := nearest.Name(t, Templates(), 2); sug != "" {
			fix = fmt.Sprintf("did you mean %q? Use one of: %s", sug, strings.Join(Templates(), ", "))
		}
		c.add("sandbox.template", CodeBadTemplate, fmt.Sprintf("sandbox template %q does not exist", textsafe.Cap(t, 60)), "", fix)
	case t == TemplateNone && m.Kind != KindRuntime && m.Kind != "":
		c.add("sandbox.template", CodeBadTemplate, fmt.Sprintf("a %s plugin cannot run without a sandbox", m.Kind),
			"every provider, tool, VCS and policy plugin runs in its own L2 container; only runtime adapters, which create those containers, run on the host",
			fmt.Sprintf("remove the line to get the default %q, or name another template", DefaultTemplate(m.Kind)))
	case t != TemplateNone && m.Kind == KindRuntime:
		c.add("sandbox.template", CodeBadTemplate, fmt.Sprintf("a runtime plugin cannot run inside the %q sandbox", t),
			"a runtime adapter starts sandboxes, and no container-runtime socket is ever available inside one",
			"remove the sandbox section or write template: none")
	}
	if t == TemplateNone && (s.MemoryBytes != 0 || s.CPUs != 0 || s.Pids != 0 || s.Timeout != 0) {
		for _, f := range []struct {
			name string
			set  bool
		}{{"memory", s.MemoryBytes != 0}, {"cpus", s.CPUs != 0}, {"pids", s.Pids != 0}, {"timeout", s.Timeout != 0}} {
			if f.set {
				c.add("sandbox."+f.name, CodeFieldNotAllowed, fmt.Sprintf("sandbox %s is set but the template is none", f.name),
					"limits apply to a sandbox, and this plugin runs without one", "remove the line")
			}
		}
	}
	if s.MemoryBytes < 0 || s.MemoryBytes > 0 && s.MemoryBytes < MinMemoryBytes {
		c.add("sandbox.memory", CodeBadLimit, fmt.Sprintf("memory %d bytes is below the minimum of 6MiB", s.MemoryBytes), "container runtimes refuse smaller limits", "write e.g. memory: 64MiB")
	}
	if s.CPUs < 0 || s.CPUs > maxCPUs || s.CPUs != s.CPUs {
		c.add("sandbox.cpus", CodeBadLimit, fmt.Sprintf("cpus %v is out of range", s.CPUs), fmt.Sprintf("a sandbox gets more than 0 and at most %d CPUs", maxCPUs), "write e.g. cpus: 0.5")
	}
	if s.Pids < 0 || s.Pids > maxPids {
		c.add("sandbox.pids", CodeBadLimit, fmt.Sprintf("pids %d is out of range", s.Pids), fmt.Sprintf("a sandbox needs at least 1 and at most %d processes", maxPids), "write e.g. pids: 50")
	}
	if s.Timeout < 0 || s.Timeout > maxTimeout {
		c.add("sandbox.timeout", CodeBadLimit, fmt.Sprintf("timeout %s is out of range", s.Timeout), "a sandbox timeout is more than 0 and at most 24h", "write e.g. timeout: 120s")
	}
}

func (c *checker) uniqueList(field string, vs []string, re *regexp.Regexp, code, why, fix string) {
	seen := map[string]int{}
	for i, v := range vs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !re.MatchString(v) || len(v) > maxTagLen*4 || field == "tags" && len(v) > maxTagLen {
			c.add(f, code, fmt.Sprintf("%q is not allowed here", textsafe.Cap(v, 60)), why, fix)
			continue
		}
		if j, dup := seen[v]; dup {
			c.add(f, CodeDuplicateValue, fmt.Sprintf("%q is listed twice (also item %d)", v, j), "", "list each value once")
			continue
		}
		seen[v] = i
	}
}

func (c *checker) tools(m *Manifest) {
	if m.Kind != KindTool {
		if m.Tools != nil && m.Kind != "" && DefaultTemplate(m.Kind) != "" {
			c.add("tools", CodeFieldNotAllowed, fmt.Sprintf("a %s plugin cannot declare tools", m.Kind),
				"only plugins of kind tool offer tools to the model", `remove the tools section, or set kind: tool`)
		}
		return
	}
	if len(m.Tools) == 0 && slices.Contains(m.RequiredCapabilities, CapDynamicTools) {
		return
	}
	if len(m.Tools) == 0 {
		c.add("tools", CodeNoTools, "a tool plugin declares no tools", "the tools list is how the kernel learns what the plugin offers",
			`add a tools list, e.g. tools: [{name: fs.read, summary: "Read a file", parameters: {type: object}}]`)
		return
	}
	seen := map[string]int{}
	var compiler *jsonschema.Compiler
	for i := range m.Tools {
		t := &m.Tools[i]
		base := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Name == "":
			c.missing(base + ".name")
		case !toolNameRE.MatchString(t.Name):
			c.add(base+".name", CodeBadToolName, fmt.Sprintf("tool name %q is not allowed", textsafe.Cap(t.Name, 60)),
				"tool names are dotted lowercase words so policies can match them (fs.*)",
				`use lowercase words joined by ".", e.g. "fs.read" or "git.diff"`)
		default:
			if j, dup := seen[t.Name]; dup {
				c.add(base+".name", CodeDuplicateTool, fmt.Sprintf("tool %q is declared twice (also tools[%d], line %d)", t.Name, j, m.at(fmt.Sprintf("tools[%d].name", j)).Line),
					"each tool name must identify one tool", "rename or remove one of them")
			} else {
				seen[t.Name] = i
			}
		}
		c.text(base+".summary", t.Summary, true)
		if t.OutputMode != "" && t.OutputMode != OutputPatch && t.OutputMode != OutputFull {
			c.add(base+".output_mode", CodeBadOutputMode, fmt.Sprintf("output_mode %q is not known", textsafe.Cap(t.OutputMode, 60)), "", `use "patch" (default) or "full"`)
		}
		if t.Lifetime != "" && t.Lifetime != LifetimeSession && t.Lifetime != LifetimePerCall {
			c.add(base+".lifetime", CodeBadLifetime, fmt.Sprintf("lifetime %q is not known", textsafe.Cap(t.Lifetime, 60)), "", `use "session" (default) or "per_call"`)
		}
		c.checkPaths(m, i)
		if t.ParametersJSON == nil {
			c.missing(base + ".parameters")
			continue
		}
		if t.schema == nil {
			if compiler == nil {
				compiler = newCompiler()
			}
			sch, msg, ptr, fix := compileSchema(compiler, i, t.ParametersJSON)
			if sch == nil {
				field := base + ".parameters"
				if ptr != "" {
					var doc any
					_ = jsonUnmarshal(t.ParametersJSON, &doc)
					field = pointerToField(field, ptr, doc)
				}
				c.add(field, CodeBadSchema, msg, "tool arguments are checked against this schema before every call", fix)
				continue
			}
			t.schema = sch
		}
	}
}

func (c *checker) provider(m *Manifest) {
	if m.Provider == nil {
		return
	}
	if m.Kind != KindProvider && m.Kind != "" && DefaultTemplate(m.Kind) != "" {
		c.add("provider", CodeFieldNotAllowed, fmt.Sprintf("a %s plugin cannot have a provider section", m.Kind),
			"network endpoints are declared only by provider plugins", "remove the provider section, or set kind: provider")
		return
	}
	seen := map[string]int{}
	for i, h := range m.Provider.Network {
		f := fmt.Sprintf("provider.network[%d]", i)
		if msg := checkHostPort(h); msg != "" {
			c.add(f, CodeBadNetworkHost, fmt.Sprintf("%q is not a host[:port]: %s", textsafe.Cap(h, 60), msg), "",
				`write a DNS name or IP address with an optional port, e.g. "api.openai.com:443"`)
			continue
		}
		if j, dup := seen[h]; dup {
			c.add(f, CodeDuplicateValue, fmt.Sprintf("%q is listed twice (also item %d)", h, j), "", "list each host once")
			continue
		}
		seen[h] = i
	}
	// The network is a capability like the kernel callbacks: approved at
	// install from required_capabilities, so it must be listed there.
	if len(m.Provider.Network) > 0 && !slices.Contains(m.RequiredCapabilities, CapNetConnect) {
		c.add("provider.network", CodeCapabilityUndeclared, "provider.network lists endpoints but required_capabilities does not list net.connect",
			"a plugin gets only the capabilities it declares, and net.connect is what you approve for network access", "add net.connect to required_capabilities")
	}
}

// KnownCapabilities is the closed vocabulary of required_capabilities,
// each enforced by the kernel: the fs.* syscalls a tool's declared paths
// and the kernel callbacks need (ReadFile: fs.read), net.connect for a
// provider's network, sandbox.toolchain and sandbox.build_cache for the
// mounts of templates that run code.
var KnownCapabilities = []string{"fs.read", "fs.list", "fs.exists", "fs.stat", "fs.write", "fs.delete",
	CapNetConnect, "sandbox.toolchain", "sandbox.build_cache", CapDynamicTools}

// CapDynamicTools is the capability of a tool plugin whose tools are
// listed at run time (the MCP bridge): it may declare no static tools.
// The kernel honours it only for fluffy's own bridge, under a name prefix
// the kernel chooses, and validates every listed schema like a manifest's.
const CapDynamicTools = "tool.dynamic"

// CapNetConnect is the capability a provider declares for its
// provider.network endpoints.
const CapNetConnect = "net.connect"

// checkHostPort returns "" if s is a lowercase DNS name or IP address with an
// optional port 1-65535 (IPv6 in brackets when a port is given).
func checkHostPort(s string) string {
	if strings.Contains(s, "://") || strings.Contains(s, "/") {
		return "write only the host and port, without a scheme or path"
	}
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.Count(s, ":") == 1 {
		return "the port is missing or malformed"
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "the port must be a number from 1 to 65535"
		}
	}
	if host == "" {
		return "the host is empty"
	}
	if net.ParseIP(host) != nil {
		return ""
	}
	if len(host) > 253 {
		return "the host name is longer than 253 characters"
	}
	for _, l := range strings.Split(host, ".") {
		if !hostLabelRE.MatchString(l) {
			return "host names are lowercase letters, digits, \"-\" and \".\" (no wildcards or schemes)"
		}
	}
	return ""
}

// CheckName reports whether n is an allowed plugin name (the rule of the
// manifest's name field), for tools that create a plugin from a name.
func CheckName(n string) error {
	if nameRE.MatchString(n) {
		return nil
	}
	return &FieldError{Field: "name", Code: CodeBadName, What: fmt.Sprintf("plugin name %q is not allowed", textsafe.Cap(n, 60)),
		Why: "plugin names are used as directory names and policy keys",
		Fix: `use 2-63 characters: a lowercase letter, then lowercase letters, digits or "-", e.g. "tool-fs"`}
}
