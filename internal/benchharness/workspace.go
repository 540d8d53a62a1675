package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/fluffy-waffle/fluffy/host/router"
	"github.com/fluffy-waffle/fluffy/host/store"
	"github.com/fluffy-waffle/fluffy/host/workspace"
	"github.com/fluffy-waffle/fluffy/lib/patch"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/policy"
)

// workspaceSuite measures the session workspace figures: building a
// plugin's view of a 10 000-file project beside `cp -r` of it (target p50
// < 300 ms), and ingesting one write into the changeset (target p50 <
// 5 ms), alone and with the view refresh that follows it.
func workspaceSuite(cfg config, progress func(string)) ([]Row, error) {
	base, err := os.MkdirTemp("", "fluffy-bench-wsp")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	proj := filepath.Join(base, "proj")
	progress("creating a 10 000-file project")
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	for d := 0; d < 100; d++ {
		dir := filepath.Join(proj, "src", fmt.Sprintf("pkg%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		for f := 0; f < 100; f++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.go", f)), body, 0o644); err != nil {
				return nil, err
			}
		}
	}
	ctx := context.Background()
	p, err := policy.Default()
	if err != nil {
		return nil, err
	}
	engine := policy.NewEngine(p, policy.Options{})
	reader := workspace.Reader{Caller: policy.Caller{Kind: "plugin", Plugin: "tool-fs", PluginKind: "tool"}}
	identity := workspace.Identity{UID: os.Getuid(), GID: os.Getgid()}

	progress(fmt.Sprintf("cp -r x%d", cfg.samples))
	var cp []time.Duration
	for i := range cfg.samples {
		dst := filepath.Join(base, fmt.Sprintf("cp%d", i))
		t0 := time.Now()
		if out, err := exec.Command("cp", "-r", proj, dst).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("cp -r: %v: %s", err, out)
		}
		cp = append(cp, time.Since(t0))
		_ = os.RemoveAll(dst)
	}

	progress(fmt.Sprintf("view creation x%d", cfg.samples))
	var create []time.Duration
	for i := range cfg.samples {
		home := filepath.Join(base, fmt.Sprintf("home%d", i))
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, err
		}
		s, err := workspace.Open(ctx, "bench", workspace.Options{Home: home, Project: proj, Judge: engine, Reader: identity})
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		_, err = s.Prepare(ctx, reader)
		create = append(create, time.Since(t0))
		_ = s.Remove()
		_ = os.RemoveAll(home)
		if err != nil {
			return nil, err
		}
	}

	progress(fmt.Sprintf("ingest of one write x%d", cfg.samples*10))
	home := filepath.Join(base, "home")
	out := filepath.Join(base, "out")
	for _, d := range []string{home, out} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	db, err := store.Open(ctx, store.Options{Dir: filepath.Join(base, "db")})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	s, err := workspace.Open(ctx, "bench", workspace.Options{Home: home, Project: proj, Judge: engine, Reader: identity, DB: db,
		Identify: func(_ context.Context, plugin, _ string) (policy.Request, error) {
			return policy.Request{Caller: reader.Caller, Sandbox: "code-executor", SessionMode: "explore"}, nil
		}})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if _, err := s.Prepare(ctx, reader); err != nil {
		return nil, err
	}
	rel := "src/pkg050/f050.go"
	cur := body
	var ingest, withRefresh []time.Duration
	for i := range cfg.samples * 10 {
		next := append(append([]byte{}, cur...), fmt.Sprintf("\n// edit %d\n", i)...)
		d, err := patch.Unified(rel, cur, next)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("op%d.patch", i)
		if err := os.WriteFile(filepath.Join(out, name), []byte(d), 0o644); err != nil {
			return nil, err
		}
		h := sha256.Sum256(cur)
		t0 := time.Now()
		err = s.Ingest(ctx, router.Output{Plugin: "tool-fs", Tool: "fs.write", CallID: "c", Dir: out,
			Changes: []tool.FileChange{{Path: rel, Mode: tool.OutputPatch, Artifact: name, SHA256Before: hex.EncodeToString(h[:])}}})
		t1 := time.Now()
		if err != nil {
			return nil, err
		}
		if _, err := s.Prepare(ctx, reader); err != nil {
			return nil, err
		}
		ingest = append(ingest, t1.Sub(t0))
		withRefresh = append(withRefresh, time.Since(t0))
		cur = next
	}

	cpRow := stats("workspace", "cp -r of a 10 000-file project", cp, "ms")
	viewRow := stats("workspace", "view creation, 10 000 files", create, "ms")
	viewRow.Baseline = cpRow.Name
	verdict(&viewRow, 300)
	inRow := stats("workspace", "ingest of one write (patch)", ingest, "ms")
	verdict(&inRow, 5)
	refRow := stats("workspace", "ingest of one write + next view refresh", withRefresh, "ms")
	refRow.Baseline = inRow.Name
	return []Row{cpRow, viewRow, inRow, refRow}, nil
}
