package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func envMap(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	user := write(t, dir, "user.yaml", "model: from-user\nmerge:\n  auto_max_lines: 100\nagent:\n  max_turns: 10\n  max_duration: 10m\n")
	project := write(t, dir, "project.yaml", "model: from-project\nagent:\n  max_turns: 20\n")
	cases := []struct {
		name   string
		env    map[string]string
		flags  map[string]string
		key    string
		want   string
		source Source
	}{
		{"default", nil, nil, "test.timeout", "300s", SourceDefault},
		{"user over default", nil, nil, "merge.auto_max_lines", "100", SourceUser},
		{"project over user", nil, nil, "model", "from-project", SourceProject},
		{"env over project", map[string]string{"FLUFFY_MODEL": "from-env"}, nil, "model", "from-env", SourceEnv},
		{"flag over env", map[string]string{"FLUFFY_MODEL": "from-env"}, map[string]string{"model": "from-flag"}, "model", "from-flag", SourceFlag},
		{"user survives where project is silent", nil, nil, "agent.max_duration", "10m", SourceUser},
		{"standard variable", map[string]string{"OPENAI_BASE_URL": "http://localhost:8080/v1"}, nil, "providers.openai.base_url", "http://localhost:8080/v1", SourceEnv},
		{"FLUFFY_ beats the standard variable", map[string]string{"OPENAI_BASE_URL": "http://a/v1", "FLUFFY_PROVIDERS_OPENAI_BASE_URL": "http://b/v1"}, nil, "providers.openai.base_url", "http://b/v1", SourceEnv},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Load(Options{UserFile: user, ProjectFile: project, Getenv: envMap(c.env), Flags: c.flags})
			if err != nil {
				t.Fatal(err)
			}
			v := cfg.Get(c.key)
			if v.Raw != c.want || v.Source != c.source {
				t.Fatalf("%s = %q from %s (%s), want %q from %s", c.key, v.Raw, v.Source, v.Origin, c.want, c.source)
			}
		})
	}
	cfg, _ := Load(Options{UserFile: user, ProjectFile: project, Getenv: envMap(nil)})
	if cfg.Int("agent.max_turns") != 20 || cfg.Duration("agent.max_duration") != 10*time.Minute {
		t.Fatalf("typed reads: %d %v", cfg.Int("agent.max_turns"), cfg.Duration("agent.max_duration"))
	}
	if o := cfg.Get("model").Origin; !strings.HasSuffix(o, "project.yaml:1") {
		t.Fatalf("origin %q lacks file:line", o)
	}
}

func TestBadInputIsLocated(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, body, code, where string
	}{
		{"unknown key", "provider: openai\nprovidr: x\n", CodeUnknownKey, ":2"},
		{"unknown nested key", "agent:\n  max_turn: 3\n", CodeUnknownKey, ":2"},
		{"bad provider", "provider: chatgpt\n", CodeBadValue, ":1"},
		{"bad duration", "test:\n  timeout: 1.5s\n", CodeBadValue, ":2"},
		{"bad url", "providers:\n  openai:\n    base_url: api.openai.com\n", CodeBadValue, ":3"},
		{"list value", "model: [a, b]\n", CodeBadValue, ":1"},
		{"not yaml", "model: [\n", CodeBadFile, ""},
		{"security setting", "policy_mode: observe\n", CodeUnknownKey, ":1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := write(t, dir, c.name+".yaml", c.body)
			_, err := Load(Options{ProjectFile: p, Getenv: envMap(nil)})
			if !uerr.HasCode(err, c.code) {
				t.Fatalf("err = %v, want %s", err, c.code)
			}
			if c.where != "" && !strings.Contains(err.Error(), p+c.where) {
				t.Fatalf("err %q does not name %s%s", err, p, c.where)
			}
			if e, _ := uerr.As(err); e.Fix == "" || e.Why == "" {
				t.Fatalf("no why/fix: %+v", e)
			}
		})
	}
	if _, err := Load(Options{Getenv: envMap(map[string]string{"FLUFFY_PROVIDER": "gpt"})}); !uerr.HasCode(err, CodeBadValue) || !strings.Contains(err.Error(), "FLUFFY_PROVIDER") {
		t.Fatalf("bad env value: %v", err)
	}
	if _, err := Load(Options{Getenv: envMap(nil), Flags: map[string]string{"nope": "1"}}); !uerr.HasCode(err, CodeUnknownKey) {
		t.Fatalf("bad flag: %v", err)
	}
}

func TestSetKeepsCommentsAndValidates(t *testing.T) {
	dir := t.TempDir()
	p := write(t, dir, "c.yaml", "# my notes\nprovider: openai # the one I pay for\n")
	if err := Set(p, "providers.openai.model", "gpt-4o"); err != nil {
		t.Fatal(err)
	}
	if err := Set(p, "merge.auto_max_lines", "200"); err != nil {
		t.Fatal(err)
	}
	if err := Set(p, "provider", "anthropic"); err != nil {
		t.Fatal(err)
	}
	if err := Set(p, "provider", "nope"); !uerr.HasCode(err, CodeBadValue) {
		t.Fatalf("bad value accepted: %v", err)
	}
	if err := Set(p, "no.such", "1"); !uerr.HasCode(err, CodeUnknownKey) {
		t.Fatalf("unknown key accepted: %v", err)
	}
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), "# my notes") || !strings.Contains(string(b), "# the one I pay for") {
		t.Fatalf("comments lost:\n%s", b)
	}
	cfg, err := Load(Options{ProjectFile: p, Getenv: envMap(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.String("provider") != "anthropic" || cfg.String("providers.openai.model") != "gpt-4o" || cfg.Int("merge.auto_max_lines") != 200 {
		t.Fatalf("values after set: %+v", cfg.All())
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
}

func TestInitProvider(t *testing.T) {
	for _, prov := range ProviderNames() {
		t.Run(prov, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.yaml")
			if err := InitProvider(p, prov, false); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(Options{UserFile: p, Getenv: envMap(nil)})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.String("provider") != prov {
				t.Fatalf("provider = %q", cfg.String("provider"))
			}
			if prov != "replay" && cfg.Get("providers."+prov+".base_url").Source != SourceUser {
				t.Fatal("base URL not written")
			}
			if err := InitProvider(p, prov, false); !uerr.HasCode(err, "CONFIG_EXISTS") {
				t.Fatalf("overwrite without force: %v", err)
			}
			if KeyInstructions(prov) == "" {
				t.Fatal("no key instructions")
			}
		})
	}
	if err := InitProvider(filepath.Join(t.TempDir(), "c.yaml"), "gpt", false); !uerr.HasCode(err, CodeBadValue) {
		t.Fatalf("bad provider: %v", err)
	}
}

func TestEveryKeyDocumentedAndDefaultValid(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Keys() {
		if seen[k.Name] {
			t.Fatalf("duplicate key %s", k.Name)
		}
		seen[k.Name] = true
		if k.Doc == "" {
			t.Fatalf("%s undocumented", k.Name)
		}
		if k.Default != "" {
			if why := k.check(k.Default); why != "" {
				t.Fatalf("%s default %q invalid: %s", k.Name, k.Default, why)
			}
		}
		if k.Env[0] != EnvName(k.Name) {
			t.Fatalf("%s env %v", k.Name, k.Env)
		}
	}
}
