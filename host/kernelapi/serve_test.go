package kernelapi

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/host/config"
	"github.com/fluffy-waffle/fluffy/host/scheduler"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// TestServeReadsTheSchedulerSettings: the scheduler.* keys are the
// kernel's concurrency limits, so one that could never run anything stops
// the kernel before it opens anything, naming the key.
func TestServeReadsTheSchedulerSettings(t *testing.T) {
	home, project := shortDir(t), t.TempDir()
	file := filepath.Join(project, ".fluffy", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("sandbox: none\nscheduler:\n  global_max: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(string) string { return "" }
	cfg, err := config.Load(config.Options{ProjectFile: file, Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = Serve(ctx, Options{Home: home, Project: project, Config: cfg, Getenv: getenv})
	if !uerr.HasCode(err, scheduler.CodeBadConfig) {
		t.Fatalf("Serve with scheduler.global_max 0: %v, want %s", err, scheduler.CodeBadConfig)
	}
}
