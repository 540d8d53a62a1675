package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/lib/units"
)

func TestValidManifests(t *testing.T) {
	tests := []struct {
		dir       string
		kind      string
		template  string
		tools     []string
		api       []int
		network   []string
		memory    int64
		timeout   time.Duration
		tag       string
		entrySuff string
	}{
		{dir: "tool-fs", kind: KindTool, template: TemplateCodeExecutor, tools: []string{"fs.read", "fs.write", "fs.list"},
			api: []int{1, 2}, memory: 512 << 20, timeout: 120 * time.Second, tag: TagCorePlugin, entrySuff: "tool-fs/bin/tool-fs"},
		{dir: "provider-openai", kind: KindProvider, template: TemplateAIProvider, api: []int{2},
			network: []string{"api.openai.com:443", "[::1]:8080", "127.0.0.1"}, tag: TagCorePlugin, entrySuff: "provider-openai/provider-openai"},
		{dir: "runtime-docker", kind: KindRuntime, template: TemplateNone, api: []int{1, 2}, tag: TagCorePlugin},
		{dir: "vcs-git", kind: KindVCS, template: TemplateCodeExecutor, api: []int{1}, memory: 256 << 20, timeout: 5 * time.Minute, tag: "vcs", entrySuff: "vcs-git/vcs-git"},
		{dir: "policy-audit", kind: KindPolicy, template: TemplatePolicySandbox, api: []int{1, 2}, memory: 64 << 20, timeout: 500 * time.Millisecond, tag: TagThirdParty},
		{dir: "minimal", kind: KindPolicy, template: TemplatePolicySandbox, api: []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			m, err := Load(filepath.Join("testdata", "valid", tt.dir))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if m.Name != tt.dir || m.Kind != tt.kind || m.Sandbox.Template != tt.template {
				t.Errorf("name/kind/template = %q/%q/%q, want %q/%q/%q", m.Name, m.Kind, m.Sandbox.Template, tt.dir, tt.kind, tt.template)
			}
			if m.SemVer == nil || m.SemVer.Original() != m.Version {
				t.Errorf("SemVer = %v for version %q", m.SemVer, m.Version)
			}
			if fmt.Sprint(m.APIVersions) != fmt.Sprint(tt.api) {
				t.Errorf("APIVersions = %v, want %v", m.APIVersions, tt.api)
			}
			var names []string
			for _, tl := range m.Tools {
				names = append(names, tl.Name)
				if _, ok := m.Tool(tl.Name); !ok {
					t.Errorf("Tool(%q) not found", tl.Name)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tt.tools) {
				t.Errorf("tools = %v, want %v", names, tt.tools)
			}
			if tt.network != nil && (m.Provider == nil || fmt.Sprint(m.Provider.Network) != fmt.Sprint(tt.network)) {
				t.Errorf("provider = %+v, want network %v", m.Provider, tt.network)
			}
			if m.Sandbox.MemoryBytes != tt.memory || m.Sandbox.Timeout != tt.timeout {
				t.Errorf("memory/timeout = %d/%s, want %d/%s", m.Sandbox.MemoryBytes, m.Sandbox.Timeout, tt.memory, tt.timeout)
			}
			if tt.tag != "" && !m.HasTag(tt.tag) {
				t.Errorf("HasTag(%q) = false, tags %v", tt.tag, m.Tags)
			}
			if m.HasTag("no_such_tag") {
				t.Error("HasTag(no_such_tag) = true")
			}
			if !filepath.IsAbs(m.Path) || filepath.Base(m.Path) != FileName || filepath.Dir(m.Path) != m.Dir {
				t.Errorf("Path/Dir = %q/%q", m.Path, m.Dir)
			}
			if tt.entrySuff != "" && !strings.HasSuffix(filepath.ToSlash(m.EntryPath()), tt.entrySuff) {
				t.Errorf("EntryPath = %q, want suffix %q", m.EntryPath(), tt.entrySuff)
			}
			if err := m.VerifyChecksum(); err != nil {
				t.Errorf("VerifyChecksum: %v", err)
			}
			if len(m.Checksum()) != 32 {
				t.Errorf("Checksum() = %x", m.Checksum())
			}
			if err := m.Validate(); err != nil {
				t.Errorf("re-Validate: %v", err)
			}
		})
	}
}

func TestToolFSDetails(t *testing.T) {
	m, err := Load("testdata/valid/tool-fs/plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"fs.read":  {OutputPatch, LifetimeSession}, // defaults
		"fs.write": {OutputFull, LifetimePerCall},
		"fs.list":  {OutputPatch, LifetimeSession},
	}
	for name, w := range want {
		tl, ok := m.Tool(name)
		if !ok {
			t.Fatalf("tool %s missing", name)
		}
		if tl.OutputMode != w[0] || tl.Lifetime != w[1] {
			t.Errorf("%s: output_mode/lifetime = %s/%s, want %s/%s", name, tl.OutputMode, tl.Lifetime, w[0], w[1])
		}
	}
	rd, _ := m.Tool("fs.read")
	wantJSON := `{"additionalProperties":false,"properties":{"max_bytes":{"minimum":1,"type":"integer"},"path":{"description":"path relative to the workspace","minLength":1,"type":"string"}},"required":["path"],"type":"object"}`
	if string(rd.ParametersJSON) != wantJSON {
		t.Errorf("ParametersJSON =\n%s\nwant\n%s", rd.ParametersJSON, wantJSON)
	}
	if m.Sandbox.CPUs != 0.5 || m.Sandbox.Pids != 50 {
		t.Errorf("cpus/pids = %v/%d", m.Sandbox.CPUs, m.Sandbox.Pids)
	}
	if _, ok := m.Tool("fs.delete"); ok {
		t.Error("Tool(fs.delete) found")
	}
	if !m.SupportsAPI(2) || m.SupportsAPI(3) {
		t.Error("SupportsAPI wrong")
	}
}

type want struct {
	code string
	line int
}

// readWants reads the "# want: CODE LINE" header of a testdata file.
func readWants(t *testing.T, data []byte) []want {
	t.Helper()
	var ws []want
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "# want: ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		line, err := strconv.Atoi(f[1])
		if len(f) != 2 || err != nil {
			t.Fatalf("bad want line %q", sc.Text())
		}
		ws = append(ws, want{f[0], line})
	}
	return ws
}

// TestInvalidTestdata checks every broken manifest in testdata/invalid: the
// exact set of (code, line) pairs its header declares, and that each problem
// is a well-formed, findable uerr.
func TestInvalidTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) < 40 {
		t.Fatalf("glob: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			wants := readWants(t, data)
			if len(wants) == 0 {
				t.Fatal("no # want: header")
			}
			m, err := Load(f)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", m)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error is %T, not *ValidationError: %v", err, err)
			}
			var got []want
			for _, fe := range ve.Errors {
				got = append(got, want{fe.Code, fe.Line})
			}
			sortWants(got)
			sortWants(wants)
			if fmt.Sprint(got) != fmt.Sprint(wants) {
				t.Errorf("problems = %v, want %v\n%v", got, wants, err)
			}
			checkProblems(t, err, f)
			for _, w := range wants {
				if !uerr.HasCode(err, w.code) || !HasCode(err, w.code) {
					t.Errorf("uerr.HasCode(err, %s) = false", w.code)
				}
			}
			if !uerr.HasCode(err, CodeInvalid) {
				t.Error("summary code missing")
			}
			if uerr.HasCode(err, "NOT_A_CODE") {
				t.Error("HasCode true for an unrelated code")
			}
		})
	}
}

func sortWants(ws []want) {
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].line != ws[j].line {
			return ws[i].line < ws[j].line
		}
		return ws[i].code < ws[j].code
	})
}

// checkProblems asserts every problem names file, line and fix, and that the
// list is sorted by line.
func checkProblems(t *testing.T, err error, file string) {
	t.Helper()
	ps := Problems(err)
	if len(ps) == 0 {
		t.Fatalf("no problems in %v", err)
	}
	for i, p := range ps {
		if p.File != file || p.Line < 1 || p.Fix == "" || p.What == "" || !strings.HasPrefix(p.Code, "MANIFEST_") {
			t.Errorf("incomplete problem %+v", p)
		}
		prefix := fmt.Sprintf("%s:%d: ", file, p.Line)
		if p.Field != "" {
			prefix = fmt.Sprintf("%s:%d: field %q: ", file, p.Line, p.Field)
		}
		if s := p.Error(); !strings.HasPrefix(s, prefix) || !strings.Contains(s, " — fix: ") {
			t.Errorf("message %q does not start with %q or lacks the fix", s, prefix)
		}
		if i > 0 && ps[i-1].Line > p.Line {
			t.Errorf("problems not sorted by line: %d before %d", ps[i-1].Line, p.Line)
		}
	}
	u := uerr.From(err)
	if u.Code != CodeInvalid || !strings.Contains(u.Render(), ps[0].What) {
		t.Errorf("rendered summary misses the first problem:\n%s", u.Render())
	}
}

func TestErrorMessageFormat(t *testing.T) {
	data, err := os.ReadFile("testdata/invalid/entry-escapes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse("plugin.yaml", data)
	want := `plugin.yaml:8: field "entry": path "../x" leaves the plugin directory — fix: make entry a path inside the plugin directory, e.g. "bin/tool-demo"`
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Column != 8 || fe.Line != 8 || fe.Field != "entry" || fe.Why == "" {
		t.Errorf("FieldError = %+v", fe)
	}
	u, ok := uerr.As(fe)
	if !ok || u.Code != CodeEntryEscapes || u.Context != "plugin.yaml:8:8" {
		t.Errorf("uerr of FieldError = %+v", u)
	}
}

func TestManyErrorsAllReported(t *testing.T) {
	data, _ := os.ReadFile("testdata/invalid/many-errors.yaml")
	_, err := Parse("p/plugin.yaml", data)
	ps := Problems(err)
	if len(ps) != 3 {
		t.Fatalf("want 3 problems, got %d: %v", len(ps), err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "p/plugin.yaml: 3 problems:\n  p/plugin.yaml:7: field \"kind\"") {
		t.Errorf("message:\n%s", msg)
	}
	for _, code := range []string{CodeBadKind, CodeEntryEscapes, CodeBadUnit, CodeInvalid} {
		if !uerr.HasCode(err, code) {
			t.Errorf("uerr.HasCode(%s) = false", code)
		}
	}
	if uerr.HasCode(err, CodeBadSemver) {
		t.Error("HasCode(BAD_SEMVER) true but no such problem")
	}
	// kind "tols" also makes the tools section and template unjudgeable;
	// none of that may surface as a second, confusing error.
	if len(uerr.From(err).Why) == 0 || !strings.Contains(uerr.From(err).Why, `did you mean "tool"?`) {
		t.Errorf("summary Why lacks the suggestion: %q", uerr.From(err).Why)
	}
}

func TestParseStructuralErrors(t *testing.T) {
	big := bytes.Repeat([]byte("# padding\n"), MaxSize/10+1)
	tests := []struct {
		name string
		data string
		code string
		line int
	}{
		{"empty", "", CodeEmpty, 1},
		{"whitespace", "\n\n   \n", CodeEmpty, 1},
		{"null document", "---\n~\n", CodeEmpty, 2},
		{"scalar document", "hello\n", CodeWrongType, 1},
		{"too large", string(big), CodeTooLarge, 1},
		{"tab indentation", "name: x\n\tkind: tool\n", CodeYAMLSyntax, 2},
		{"control character", "name: x\nkind: \x01tool\n", CodeYAMLSyntax, 2},
		{"invalid utf8", "name: x\nauthor: \xff\xfe\n", CodeYAMLSyntax, 2},
		{"second empty document", "name: x\n---\n", CodeMultiDoc, 2},
		{"syntax error in second document", "name: x\n---\na: [\n", CodeYAMLSyntax, 0},
		{"merge key", "base: &b {name: x}\n<<: *b\n", CodeYAMLAlias, 2},
		{"non-string key", "1: x\n", CodeWrongType, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("dir/plugin.yaml", []byte(tt.data))
			if !uerr.HasCode(err, tt.code) {
				t.Fatalf("want %s, got %v", tt.code, err)
			}
			for _, p := range Problems(err) {
				if p.Code == tt.code && (tt.line == 0 || p.Line == tt.line) && p.Line >= 1 && p.File == "dir/plugin.yaml" {
					return
				}
			}
			t.Errorf("no %s problem at line %d: %v", tt.code, tt.line, err)
		})
	}
}

func TestDefaultTemplatePerKind(t *testing.T) {
	for kind, tmpl := range map[string]string{KindTool: TemplateCodeExecutor, KindVCS: TemplateCodeExecutor,
		KindProvider: TemplateAIProvider, KindPolicy: TemplatePolicySandbox, KindRuntime: TemplateNone} {
		t.Run(kind, func(t *testing.T) {
			src := fmt.Sprintf("name: demo\nversion: 1.0.0\nkind: %s\ndescription: d\nauthor: a\nentry: demo\nsha256: %s\napi_versions: [1]\n", kind, strings.Repeat("a", 64))
			if kind == KindTool {
				src += "tools: [{name: demo.x, summary: s, parameters: {type: object}}]\n"
			}
			m, err := Parse("plugin.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if m.Sandbox.Template != tmpl {
				t.Errorf("template = %q, want %q", m.Sandbox.Template, tmpl)
			}
		})
	}
}

// TestUnitsAreThePolicyParser: manifests and policy files share one unit
// parser (lib/units). Every notation is judged the same way by both, and
// a manifest's error names the notation the policy documentation uses.
func TestUnitsAreThePolicyParser(t *testing.T) {
	manifest := func(field, value string) string {
		return "name: units-probe\nversion: 1.0.0\nkind: policy\ndescription: d\nauthor: a\nentry: u\nsha256: " + strings.Repeat("a", 64) + "\napi_versions: [1]\n" +
			"sandbox:\n  template: policy-sandbox\n  " + field + ": " + value + "\n"
	}
	sizes := []string{"512MiB", "1GiB", "64MiB", "8000KB", "7MB", "3GB", "8388608", "512mb", "512 MiB", "1.5GiB",
		"-1MiB", "MiB", "99999999999999999999GiB", "9999999999GiB", "1TiB", "10MiBs", "0x10", "1B"}
	for _, in := range sizes {
		want, werr := units.ParseSize(in)
		m, err := Parse("plugin.yaml", []byte(manifest("memory", `"`+in+`"`)))
		switch {
		case werr != nil:
			if !HasCode(err, CodeBadUnit) {
				t.Errorf("memory %q: units refuses it (%v) but the manifest gave %v", in, werr, err)
			} else if !strings.Contains(err.Error(), units.SizeHelp) {
				t.Errorf("memory %q: the manifest error does not give the shared notation help: %v", in, err)
			}
		case err != nil:
			t.Errorf("memory %q: units accepts it (%d) but the manifest refused it: %v", in, want, err)
		case m.Sandbox.MemoryBytes != want:
			t.Errorf("memory %q = %d, units says %d", in, m.Sandbox.MemoryBytes, want)
		}
	}
	durations := []string{"120s", "500ms", "5m", "2h", "1m30s", "1.5s", "10us", "10S", "99999999999999h", "ms", "5 s"}
	for _, in := range durations {
		want, werr := units.ParseDuration(in)
		m, err := Parse("plugin.yaml", []byte(manifest("timeout", `"`+in+`"`)))
		switch {
		case werr != nil:
			if !HasCode(err, CodeBadUnit) {
				t.Errorf("timeout %q: units refuses it (%v) but the manifest gave %v", in, werr, err)
			} else if !strings.Contains(err.Error(), units.DurationHelp) {
				t.Errorf("timeout %q: the manifest error does not give the shared notation help: %v", in, err)
			}
		case err != nil:
			t.Errorf("timeout %q: units accepts it (%s) but the manifest refused it: %v", in, want, err)
		case m.Sandbox.Timeout != want:
			t.Errorf("timeout %q = %s, units says %s", in, m.Sandbox.Timeout, want)
		}
	}
}

// writePlugin creates a plugin directory with a real entry file and a
// manifest stamped with its checksum.
func writePlugin(t *testing.T, entry string, content []byte) (dir string, m *Manifest) {
	t.Helper()
	dir = t.TempDir()
	p := filepath.Join(dir, filepath.FromSlash(entry))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, content, 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("name: demo\nversion: 1.0.0\nkind: vcs\ndescription: d\nauthor: a\nentry: %s\nsha256: %s\napi_versions: [1]\n", entry, sum)
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func TestVerifyChecksum(t *testing.T) {
	t.Run("match", func(t *testing.T) {
		_, m := writePlugin(t, "bin/demo", []byte("binary v1"))
		if err := m.VerifyChecksum(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("mismatch", func(t *testing.T) {
		dir, m := writePlugin(t, "bin/demo", []byte("binary v1"))
		if err := os.WriteFile(filepath.Join(dir, "bin", "demo"), []byte("binary v2"), 0o755); err != nil {
			t.Fatal(err)
		}
		err := m.VerifyChecksum()
		if !uerr.HasCode(err, CodeChecksumMismatch) {
			t.Fatalf("want mismatch, got %v", err)
		}
		got, _ := FileSHA256(filepath.Join(dir, "bin", "demo"))
		if !strings.Contains(err.Error(), got) || !strings.Contains(err.Error(), m.SHA256) || got == m.SHA256 {
			t.Errorf("message lacks both sums: %v", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		dir, m := writePlugin(t, "demo", []byte("x"))
		os.Remove(filepath.Join(dir, "demo"))
		if err := m.VerifyChecksum(); !uerr.HasCode(err, CodeEntryMissing) {
			t.Fatalf("want entry missing, got %v", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		dir, m := writePlugin(t, "demo", []byte("x"))
		os.Remove(filepath.Join(dir, "demo"))
		os.Mkdir(filepath.Join(dir, "demo"), 0o755)
		if err := m.VerifyChecksum(); !uerr.HasCode(err, CodeEntryNotRegular) {
			t.Fatalf("want not regular, got %v", err)
		}
	})
	t.Run("symlink outside", func(t *testing.T) {
		dir, m := writePlugin(t, "demo", []byte("x"))
		outside := filepath.Join(t.TempDir(), "real")
		os.WriteFile(outside, []byte("x"), 0o755)
		os.Remove(filepath.Join(dir, "demo"))
		if err := os.Symlink(outside, filepath.Join(dir, "demo")); err != nil {
			t.Fatal(err)
		}
		if err := m.VerifyChecksum(); !uerr.HasCode(err, CodeEntrySymlink) {
			t.Fatalf("want symlink refused, got %v", err)
		}
	})
	// Any link is refused, even one that stays inside: it can be repointed
	// after review.
	t.Run("symlink inside", func(t *testing.T) {
		dir, m := writePlugin(t, "demo", []byte("x"))
		os.Rename(filepath.Join(dir, "demo"), filepath.Join(dir, "demo-1.0"))
		if err := os.Symlink("demo-1.0", filepath.Join(dir, "demo")); err != nil {
			t.Fatal(err)
		}
		if err := m.VerifyChecksum(); !uerr.HasCode(err, CodeEntrySymlink) {
			t.Fatalf("want symlink refused, got %v", err)
		}
	})
	// An entry reached through a directory symlink (bin -> a
	// directory outside the plugin) passed the old check, which only looked
	// at the last component.
	t.Run("directory symlink", func(t *testing.T) {
		dir, m := writePlugin(t, "bin/demo", []byte("elsewhere"))
		outside := filepath.Join(t.TempDir(), "real-bin")
		if err := os.Rename(filepath.Join(dir, "bin"), outside); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(dir, "bin")); err != nil {
			t.Fatal(err)
		}
		err := m.VerifyChecksum()
		if !uerr.HasCode(err, CodeEntrySymlink) || !strings.Contains(err.Error(), filepath.Join(dir, "bin")) {
			t.Fatalf("want directory symlink refused, got %v", err)
		}
	})
	t.Run("subdirectory ok", func(t *testing.T) {
		_, m := writePlugin(t, "bin/demo", []byte("inside"))
		if err := m.VerifyChecksum(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); !uerr.HasCode(err, CodeNotFound) {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope.yaml")); !uerr.HasCode(err, CodeNotFound) {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, bytes.Repeat([]byte("#\n"), MaxSize), 0o644)
	if _, err := Load(big); !uerr.HasCode(err, CodeTooLarge) {
		t.Errorf("big file: %v", err)
	}
	sub := filepath.Join(dir, "sub")
	os.MkdirAll(filepath.Join(sub, FileName), 0o755) // plugin.yaml is a directory
	if _, err := Load(sub); !uerr.HasCode(err, CodeReadFailed) {
		t.Errorf("plugin.yaml directory: %v", err)
	}
}

func TestValidateArgs(t *testing.T) {
	m, err := Load("testdata/valid/tool-fs")
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := m.Tool("fs.read")
	wr, _ := m.Tool("fs.write")
	ls, _ := m.Tool("fs.list")
	tests := []struct {
		name  string
		tool  Tool
		args  string
		ok    bool
		needs []string // substrings of the error
	}{
		{"good", rd, `{"path": "README.md", "max_bytes": 10}`, true, nil},
		{"good minimal", wr, `{"path": "a", "content": ""}`, true, nil},
		{"empty args for optional params", ls, ``, true, nil},
		{"missing required", rd, `{}`, false, []string{"at /:", "path"}},
		{"wrong type", rd, `{"path": 5}`, false, []string{"at /path:", "string"}},
		{"below minimum", rd, `{"path": "a", "max_bytes": 0}`, false, []string{"at /max_bytes:"}},
		{"additional property", rd, `{"path": "a", "force": true}`, false, []string{"at /:", "force"}},
		{"two problems", wr, `{"path": "", "content": 1}`, false, []string{"at /path:", "at /content:"}},
		{"enum", wr, `{"path": "a", "content": "", "mode": "append"}`, false, []string{"at /mode:"}},
		{"not json", rd, `{path: a}`, false, []string{"not valid JSON"}},
		{"trailing garbage", rd, `{"path": "a"} x`, false, []string{"not valid JSON"}},
		{"not an object", rd, `["a"]`, false, []string{"at /:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tool.ValidateArgs([]byte(tt.args))
			if tt.ok {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !uerr.HasCode(err, CodeToolArgsInvalid) {
				t.Fatalf("want TOOL_ARGS_INVALID, got %v", err)
			}
			u, _ := uerr.As(err)
			if u.Fix == "" || !strings.Contains(u.What, tt.tool.Name) {
				t.Errorf("incomplete error %+v", u)
			}
			for _, s := range tt.needs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
	if err := (Tool{Name: "x.y"}).ValidateArgs([]byte(`{}`)); !uerr.HasCode(err, CodeToolSchemaMissing) {
		t.Errorf("zero Tool: %v", err)
	}
}

func TestValidateManifestBuiltInCode(t *testing.T) {
	m := &Manifest{Name: "demo", Version: "1.0.0", Kind: KindTool, Description: "d", Author: "a", Entry: "demo",
		SHA256: strings.Repeat("b", 64), APIVersions: []int{1},
		Tools: []Tool{{Name: "demo.run", Summary: "s", ParametersJSON: []byte(`{"type":"object","required":["x"]}`)}}}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := m.Tools[0].ValidateArgs([]byte(`{}`)); !uerr.HasCode(err, CodeToolArgsInvalid) {
		t.Errorf("schema not compiled by Validate: %v", err)
	}
	bad := &Manifest{Name: "demo", Version: "1", Kind: KindTool, Entry: "../demo", APIVersions: []int{0},
		Tools: []Tool{{Name: "demo.run", Summary: "s", ParametersJSON: []byte(`{"type":"object","properties":{"x":{"type":7}}}`)}}}
	err := bad.Validate()
	for _, code := range []string{CodeBadSemver, CodeMissingField, CodeEntryEscapes, CodeMissingSHA256, CodeBadAPIVersions, CodeBadSchema} {
		if !HasCode(err, code) {
			t.Errorf("missing %s in %v", code, err)
		}
	}
	for _, p := range Problems(err) {
		if p.Line != 0 {
			t.Errorf("code-built manifest has a line number: %+v", p)
		}
		if p.Code == CodeBadSchema && p.Field != "tools[0].parameters.properties.x.type" {
			t.Errorf("schema problem field = %q", p.Field)
		}
	}
}

func TestSchemaErrorPointsAtLine(t *testing.T) {
	src := `name: demo
version: 1.0.0
kind: tool
description: d
author: a
entry: demo
sha256: ` + strings.Repeat("c", 64) + `
api_versions: [1]
tools:
  - name: demo.run
    summary: s
    parameters:
      type: object
      properties:
        a: {type: string}
        b:
          type: [string, 12]
`
	_, err := Parse("plugin.yaml", []byte(src))
	ps := Problems(err)
	if len(ps) != 1 || ps[0].Code != CodeBadSchema || ps[0].Line != 17 || ps[0].Field != "tools[0].parameters.properties.b.type" {
		t.Fatalf("got %+v / %v", ps, err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// One tool's broken schema must not spoil the others compiled with the same
// compiler, and each keeps its own schema.
func TestSchemasCompiledIndependently(t *testing.T) {
	src := "name: demo\nversion: 1.0.0\nkind: tool\ndescription: d\nauthor: a\nentry: demo\nsha256: " + strings.Repeat("d", 64) + "\napi_versions: [1]\n" +
		"tools:\n" +
		"  - {name: demo.a, summary: s, parameters: {type: object, properties: {x: {type: strin}}}}\n" +
		"  - {name: demo.b, summary: s, parameters: {type: object, required: [b]}}\n" +
		"  - {name: demo.c, summary: s, parameters: {type: object, required: [c]}}\n"
	_, err := Parse("plugin.yaml", []byte(src))
	if ps := Problems(err); len(ps) != 1 || ps[0].Line != 10 || ps[0].Field != "tools[0].parameters.properties.x.type" {
		t.Fatalf("problems = %v", err)
	}
	m, err := Parse("plugin.yaml", []byte(strings.Replace(src, "strin", "string", 1)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m.Tool("demo.b")
	c, _ := m.Tool("demo.c")
	if err := b.ValidateArgs([]byte(`{"b": 1}`)); err != nil {
		t.Errorf("demo.b: %v", err)
	}
	if err := c.ValidateArgs([]byte(`{"b": 1}`)); !strings.Contains(fmt.Sprint(err), "c") || err == nil {
		t.Errorf("demo.c accepted args missing c: %v", err)
	}
}

// ValidateArgs is called from many sessions at once on one loaded manifest.
func TestValidateArgsConcurrent(t *testing.T) {
	m, err := Load("testdata/valid/tool-fs")
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := m.Tool("fs.read")
	errs := make(chan error, 16)
	for i := range 16 {
		go func() {
			args := fmt.Sprintf(`{"path": "f%d"}`, i)
			if i%2 == 1 {
				args = `{"path": 1}`
			}
			err := rd.ValidateArgs([]byte(args))
			if (err == nil) != (i%2 == 0) {
				errs <- fmt.Errorf("call %d: %v", i, err)
				return
			}
			errs <- nil
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// A remembered stamp skips hashing only for the very bytes that were
// hashed: rewriting the file with the same size and mtime still changes
// its ctime, so the tampered binary is hashed and refused.
func TestVerifyChecksumSince(t *testing.T) {
	dir, m := writePlugin(t, "bin/demo", []byte("binary v1"))
	stamp, err := m.VerifyChecksumSince("")
	if err != nil || stamp == "" {
		t.Fatalf("first verification: stamp %q, %v", stamp, err)
	}
	again, err := m.VerifyChecksumSince(stamp)
	if err != nil || again != stamp {
		t.Fatalf("unchanged file: stamp %q (want %q), %v", again, stamp, err)
	}
	// A stale stamp of another file proves nothing: hash again.
	if _, err := m.VerifyChecksumSince("1:2:3:4.5:6.7"); err != nil {
		t.Fatalf("unknown stamp on a good binary: %v", err)
	}
	p := filepath.Join(dir, "bin", "demo")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a ctime the write cannot share with the stamp's
	if err := os.WriteFile(p, []byte("binary v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	_, err = m.VerifyChecksumSince(stamp)
	if !uerr.HasCode(err, CodeChecksumMismatch) {
		t.Fatalf("tampered binary with its old size and mtime: want checksum mismatch, got %v", err)
	}
}
