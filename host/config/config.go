package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/lib/units"
	"github.com/fluffy-waffle/fluffy/lib/yamlpos"
)

// Source says which layer a value came from.
type Source string

const (
	SourceDefault Source = "default"
	SourceUser    Source = "user"
	SourceProject Source = "project"
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
)

// Error codes.
const (
	CodeUnknownKey = "CONFIG_UNKNOWN_KEY"
	CodeBadValue   = "CONFIG_BAD_VALUE"
	CodeBadFile    = "CONFIG_BAD_FILE"
)

// MaxFileSize bounds a config file.
const MaxFileSize = 256 << 10

// Value is one resolved setting and where it came from.
type Value struct {
	Key    string
	Raw    string
	Source Source
	// Origin is the file:line, environment variable or flag that set it.
	Origin string
}

// Options say where the layers are.
type Options struct {
	// UserFile is ~/.fluffy/config.yaml ($FLUFFY_HOME/config.yaml).
	UserFile string
	// ProjectFile is <project>/.fluffy/config.yaml.
	ProjectFile string
	Getenv      func(string) string
	// Flags are command-line values by key (already named by key).
	Flags map[string]string
}

// Config is the resolved configuration.
type Config struct {
	keys   map[string]Key
	values map[string]Value
}

// UserFile and ProjectFile are the standard locations.
func UserFile(home string) string       { return filepath.Join(home, "config.yaml") }
func ProjectFile(project string) string { return filepath.Join(project, ".fluffy", "config.yaml") }

// Load resolves every key through the layers. All problems of all layers
// are reported at once.
func Load(o Options) (*Config, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	c := &Config{keys: map[string]Key{}, values: map[string]Value{}}
	for _, k := range Keys() {
		c.keys[k.Name] = k
		c.values[k.Name] = Value{Key: k.Name, Raw: k.Default, Source: SourceDefault, Origin: "default"}
	}
	var errs []error
	for _, layer := range []struct {
		file string
		src  Source
	}{{o.UserFile, SourceUser}, {o.ProjectFile, SourceProject}} {
		if layer.file == "" {
			continue
		}
		vals, err := readFile(layer.file, c.keys)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, v := range vals {
			v.Source = layer.src
			c.values[v.Key] = v
		}
	}
	for _, k := range Keys() {
		// Strongest variable last so it wins.
		for i := len(k.Env) - 1; i >= 0; i-- {
			raw := o.Getenv(k.Env[i])
			if raw == "" {
				continue
			}
			if why := k.check(raw); why != "" {
				errs = append(errs, badValue(k, raw, "environment variable "+k.Env[i], why))
				continue
			}
			c.values[k.Name] = Value{Key: k.Name, Raw: raw, Source: SourceEnv, Origin: k.Env[i]}
		}
	}
	flags := make([]string, 0, len(o.Flags))
	for name := range o.Flags {
		flags = append(flags, name)
	}
	sort.Strings(flags)
	for _, name := range flags {
		raw := o.Flags[name]
		k, ok := c.keys[name]
		if !ok {
			errs = append(errs, unknownKey(name, "flag"))
			continue
		}
		if why := k.check(raw); why != "" {
			errs = append(errs, badValue(k, raw, "flag --"+strings.ReplaceAll(name, ".", "-"), why))
			continue
		}
		c.values[name] = Value{Key: name, Raw: raw, Source: SourceFlag, Origin: "--" + name}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

func unknownKey(name, where string) *uerr.Error {
	return uerr.New(CodeUnknownKey, fmt.Sprintf("unknown setting %q (%s)", name, where),
		"fluffy reads only the settings listed by `fluffy config show --all`"+suggest(name),
		"fix the spelling or remove it; security settings belong in .fluffy/policy.yaml, not config")
}

func badValue(k Key, raw, where, why string) *uerr.Error {
	return uerr.New(CodeBadValue, fmt.Sprintf("bad value %q for %s (%s)", raw, k.Name, where), why,
		"set it to a valid value, e.g. `fluffy config set "+k.Name+" "+example(k)+"`")
}

func example(k Key) string {
	switch {
	case k.Default != "":
		return k.Default
	case k.Kind == KindEnum:
		return k.Enum[0]
	}
	return "VALUE"
}

// suggest names a close key (one edit or a different separator).
func suggest(name string) string {
	n := strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(name))
	for _, k := range Keys() {
		if k.Name == n || strings.HasSuffix(k.Name, "."+n) {
			return "; did you mean " + k.Name + "?"
		}
	}
	return ""
}

// readFile parses a config file into flat keys with their lines. A missing
// file is no error.
func readFile(path string, keys map[string]Key) ([]Value, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, uerr.Wrap(err, CodeBadFile, "cannot read config "+path, err.Error(), "check the file's permissions")
	}
	if len(data) > MaxFileSize {
		return nil, uerr.New(CodeBadFile, fmt.Sprintf("config %s is %d bytes", path, len(data)), fmt.Sprintf("config files are limited to %d bytes", MaxFileSize), "keep only the settings you change")
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, uerr.Wrap(err, CodeBadFile, "config "+path+" is not valid YAML", err.Error(), "fix the YAML (`fluffy config show` prints a valid file)")
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, uerr.New(CodeBadFile, fmt.Sprintf("%s:%d: config is not a mapping", path, root.Line), "a config file maps setting names to values", "write `key: value` lines")
	}
	var out []Value
	var errs []error
	yamlpos.Leaves(root, func(p yamlpos.Pair) {
		kn, vn, name := p.Key, p.Value, p.Path
		where := fmt.Sprintf("%s:%d", path, kn.Line)
		k, ok := keys[name]
		if !ok {
			errs = append(errs, unknownKey(name, where))
			return
		}
		if vn.Kind != yaml.ScalarNode || vn.Tag == "!!null" {
			errs = append(errs, badValue(k, "", where, "a single value is expected"))
			return
		}
		if why := k.check(vn.Value); why != "" {
			errs = append(errs, badValue(k, vn.Value, where, why))
			return
		}
		out = append(out, Value{Key: name, Raw: vn.Value, Origin: where})
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Get returns a key's resolved value; it panics on an undeclared key (a
// programming error, caught by tests).
func (c *Config) Get(key string) Value {
	v, ok := c.values[key]
	if !ok {
		panic("config: undeclared key " + key)
	}
	return v
}

// String, Int, Bool, Duration and Float read typed values; the values were
// validated at load.
func (c *Config) String(key string) string { return c.Get(key).Raw }

func (c *Config) Int(key string) int {
	n, _ := strconv.Atoi(c.Get(key).Raw)
	return n
}

func (c *Config) Bool(key string) bool {
	b, _ := strconv.ParseBool(c.Get(key).Raw)
	return b
}

func (c *Config) Duration(key string) time.Duration {
	d, _ := units.ParseDuration(c.Get(key).Raw)
	return d
}

func (c *Config) Float(key string) float64 {
	f, _ := strconv.ParseFloat(c.Get(key).Raw, 64)
	return f
}

// All returns every value in documentation order.
func (c *Config) All() []Value {
	out := make([]Value, 0, len(c.values))
	for _, k := range Keys() {
		out = append(out, c.values[k.Name])
	}
	return out
}

// Lookup returns a declared key.
func Lookup(name string) (Key, error) {
	for _, k := range Keys() {
		if k.Name == name {
			return k, nil
		}
	}
	return Key{}, unknownKey(name, "command line")
}

// Set writes key=raw into the YAML file at path (created 0600 if absent),
// keeping its comments and other keys, after validating the value. The file
// is replaced atomically.
func Set(path, key, raw string) error {
	k, err := Lookup(key)
	if err != nil {
		return err
	}
	if why := k.check(raw); why != "" {
		return badValue(k, raw, "command line", why)
	}
	var doc yaml.Node
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if len(bytes.TrimSpace(data)) > 0 {
		// Refuse to edit a file that does not load: the user would lose
		// track of which of its lines count.
		if _, err := readFile(path, keyMap()); err != nil {
			return err
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return err
		}
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	node := doc.Content[0]
	parts := strings.Split(key, ".")
	for i, p := range parts {
		var next *yaml.Node
		for j := 0; j+1 < len(node.Content); j += 2 {
			if node.Content[j].Value == p {
				next = node.Content[j+1]
				break
			}
		}
		last := i == len(parts)-1
		if next == nil {
			kn := &yaml.Node{Kind: yaml.ScalarNode, Value: p}
			if last {
				next = &yaml.Node{Kind: yaml.ScalarNode}
			} else {
				next = &yaml.Node{Kind: yaml.MappingNode}
			}
			node.Content = append(node.Content, kn, next)
		}
		if last {
			next.Kind, next.Tag, next.Value, next.Style = yaml.ScalarNode, "", raw, 0
			if k.Kind != KindInt && k.Kind != KindBool && k.Kind != KindNumber {
				next.Tag = "!!str"
			}
		} else if next.Kind != yaml.MappingNode {
			return uerr.New(CodeBadFile, fmt.Sprintf("%s: %s is a value, not a section", path, strings.Join(parts[:i+1], ".")), "the file's shape conflicts with the key", "edit the file by hand")
		}
		node = next
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeAtomic(path, buf.Bytes())
}

func keyMap() map[string]Key {
	m := map[string]Key{}
	for _, k := range Keys() {
		m[k.Name] = k
	}
	return m
}

func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}

// InitProvider writes a config for one provider: provider, its base URL and
// model. It refuses to overwrite an existing file unless force is set.
func InitProvider(path, provider string, force bool) error {
	k, _ := Lookup("provider")
	if why := k.check(provider); why != "" {
		return badValue(k, provider, "--provider", why)
	}
	if _, err := os.Stat(path); err == nil && !force {
		return uerr.New("CONFIG_EXISTS", path+" already exists", "init writes a fresh file", "edit it with `fluffy config set`, or pass --force to replace it")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# fluffy configuration (`fluffy config show --all` lists every setting).\n")
	fmt.Fprintf(&b, "# Security settings are not here: they are the policy's (.fluffy/policy.yaml).\n")
	fmt.Fprintf(&b, "provider: %s\n", provider)
	if provider == "replay" {
		fmt.Fprintf(&b, "providers:\n  replay:\n    cassette: %q\n", "")
	} else {
		var base, model string
		for _, k := range Keys() {
			switch k.Name {
			case "providers." + provider + ".base_url":
				base = k.Default
			case "providers." + provider + ".model":
				model = k.Default
			}
		}
		fmt.Fprintf(&b, "providers:\n  %s:\n    base_url: %s\n    model: %s\n", provider, base, model)
	}
	if _, err := readFileBytes(path, []byte(b.String())); err != nil {
		return err
	}
	return writeAtomic(path, []byte(b.String()))
}

// readFileBytes validates data as if it were path's content.
func readFileBytes(path string, data []byte) ([]Value, error) {
	dir, err := os.MkdirTemp("", "fluffy-config")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return nil, err
	}
	return readFile(p, keyMap())
}

// KeyHelp describes a key for `config show --all` and errors.
func KeyHelp(name string) string {
	k, err := Lookup(name)
	if err != nil {
		return ""
	}
	return k.help()
}

// KeyInstructions tells where a provider's API key goes (used by init).
func KeyInstructions(provider string) string {
	switch provider {
	case "openai":
		return "Put the API key in OPENAI_API_KEY, or in a file of mode 0600 named by providers.openai.api_key_file. fluffy reads it from the shell that runs each task and hands it to the provider plugin; it is never written to config, logs or the audit log."
	case "anthropic":
		return "Put the API key in ANTHROPIC_API_KEY, or in a file of mode 0600 named by providers.anthropic.api_key_file. fluffy reads it from the shell that runs each task and hands it to the provider plugin; it is never written to config, logs or the audit log."
	case "ollama":
		return "Ollama needs no key. Start it (`ollama serve`) and pull the model (`ollama pull " + defaultModel("ollama") + "`)."
	case "replay":
		return "provider-replay plays a recorded cassette: set providers.replay.cassette to its path."
	}
	return ""
}

func defaultModel(p string) string {
	k, _ := Lookup("providers." + p + ".model")
	return k.Default
}
