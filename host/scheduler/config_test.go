package scheduler

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

func TestConfigFromSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	load := func(body string, env map[string]string) (Config, error) {
		t.Helper()
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(config.Options{ProjectFile: file, Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		return ConfigFrom(c)
	}
	cfg, err := load("", nil)
	if err != nil || cfg.GlobalMax != 4 || cfg.PerTemplate["ai-provider"] != 2 || cfg.PerTemplate["code-executor"] != 2 || cfg.PerTemplate["policy-sandbox"] != 1 || cfg.AgeThreshold != 30*time.Second {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	cfg, err = load("scheduler:\n  global_max: 8\n  per_template:\n    code-executor: 3\n  age_threshold: 5s\n", map[string]string{"FLUFFY_SCHEDULER_PER_TEMPLATE_AI_PROVIDER": "4"})
	if err != nil || cfg.GlobalMax != 8 || cfg.PerTemplate["code-executor"] != 3 || cfg.PerTemplate["ai-provider"] != 4 || cfg.AgeThreshold != 5*time.Second {
		t.Fatalf("configured: %+v %v", cfg, err)
	}
	s, err := New(Options{Config: cfg})
	if err != nil || s.Config().GlobalMax != 8 {
		t.Fatalf("New: %v", err)
	}
	if _, err := load("scheduler:\n  per_template:\n    policy-sandbox: 0\n", nil); !uerr.HasCode(err, CodeBadConfig) {
		t.Fatalf("zero limit: %v", err)
	}
}
