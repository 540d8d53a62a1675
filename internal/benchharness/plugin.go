package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/supervisor"
	"github.com/fluffy-waffle/fluffy/plugins/base"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
)

// pluginSuite measures the plugin core: start to ready through go-plugin
// beside a bare exec of the same binary, and tool-call round trips beside
// the cost of the same work done with no process boundary at all.
func pluginSuite(cfg config, progress func(string)) ([]Row, error) {
	bin, err := filepath.Abs(filepath.Join(cfg.bin, "plugins", "tool-fs", "tool-fs"))
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("read %s (run `make build` first): %w", bin, err)
	}
	h := sha256.Sum256(raw)
	sum := hex.EncodeToString(h[:])
	ws, err := os.MkdirTemp("", "fluffy-bench-ws")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(ws)
	small := []byte("hello\n")
	big := []byte(strings.Repeat("0123456789abcdef", 4096)) // 64 KiB
	os.WriteFile(filepath.Join(ws, "small.txt"), small, 0o644)
	os.WriteFile(filepath.Join(ws, "big.txt"), big, 0o644)

	// Baseline: the same binary exec'd with no go-plugin handshake (it sees
	// no magic cookie, prints a notice and exits).
	progress(fmt.Sprintf("bare subprocess start x%d", cfg.samples))
	var bare []time.Duration
	for range cfg.samples {
		t0 := time.Now()
		cmd := exec.Command(bin)
		cmd.Env = []string{}
		_ = cmd.Run()
		bare = append(bare, time.Since(t0))
	}

	// Part of the first start in a kernel process: the binary store copies
	// the binary while hashing it (later starts of the unchanged binary only
	// stat it). Measured on its own so the start figure can be read.
	progress(fmt.Sprintf("sha256 of the plugin binary x%d", cfg.samples))
	var hashes []time.Duration
	for range cfg.samples {
		t0 := time.Now()
		b, _ := os.ReadFile(bin)
		_ = sha256.Sum256(b)
		hashes = append(hashes, time.Since(t0))
	}

	progress(fmt.Sprintf("go-plugin start to ready x%d", cfg.samples))
	spec := supervisor.Spec{Name: "tool-fs", Version: "0.1.0", Kind: base.KindTool, Binary: bin, SHA256: sum, APIVersions: []int{1, 2}}
	var starts []time.Duration
	for range cfg.samples {
		sup := supervisor.New(supervisor.Options{Logger: hclog.NewNullLogger(), Workspace: ws, OutRoot: filepath.Join(ws, ".out")})
		if err := sup.Add(spec); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if _, err := sup.Tools(context.Background(), "tool-fs"); err != nil {
			return nil, err
		}
		starts = append(starts, time.Since(t0))
		sup.Close()
	}

	sup := supervisor.New(supervisor.Options{Logger: hclog.NewNullLogger(), Workspace: ws, OutRoot: filepath.Join(ws, ".out")})
	defer sup.Close()
	if err := sup.Add(spec); err != nil {
		return nil, err
	}
	call := func(path string) (time.Duration, error) {
		t0 := time.Now()
		r, err := sup.CallTool(context.Background(), "tool-fs", tool.Call{ID: "b", Tool: "fs.read", Args: json.RawMessage(`{"path":"` + path + `"}`)}, nil)
		d := time.Since(t0)
		if err == nil && !r.OK {
			err = r.Err
		}
		return d, err
	}
	if _, err := call("small.txt"); err != nil { // warm
		return nil, err
	}
	direct := func(p []byte) time.Duration {
		// The in-process baseline: the same read + JSON encoding of the
		// result, with no RPC and no process boundary.
		t0 := time.Now()
		b, _ := os.ReadFile(filepath.Join(ws, "small.txt"))
		if len(p) > len(small) {
			b, _ = os.ReadFile(filepath.Join(ws, "big.txt"))
		}
		_, _ = json.Marshal(map[string]any{"path": "x", "content": string(b)})
		return time.Since(t0)
	}
	var rows []Row
	bareRow := stats("plugin", "bare subprocess start (same binary, no go-plugin)", bare, "ms")
	startRow := stats("plugin", "plugin start to ready (go-plugin subprocess)", starts, "ms")
	startRow.Baseline = bareRow.Name
	verdict(&startRow, 15)
	hashRow := stats("plugin", fmt.Sprintf("sha256 of the %.1f MB plugin binary (part of each start)", float64(len(raw))/1e6), hashes, "ms")
	rows = append(rows, bareRow, hashRow, startRow)
	for _, c := range []struct {
		label, path string
		payload     []byte
		n           int
		target      float64
	}{{"small", "small.txt", small, 3000, 150}, {"64KiB", "big.txt", big, 1000, 0}} {
		progress(fmt.Sprintf("tool-call round trip %s x%d", c.label, c.n))
		var rpc, dir []time.Duration
		for range c.n {
			d, err := call(c.path)
			if err != nil {
				return nil, err
			}
			rpc = append(rpc, d)
			dir = append(dir, direct(c.payload))
		}
		dr := stats("plugin", "direct in-process call ("+c.label+")", dir, "µs")
		rr := stats("plugin", "tool-call round trip via gRPC ("+c.label+")", rpc, "µs")
		rr.Baseline = dr.Name
		if c.target > 0 {
			verdict(&rr, c.target)
		}
		rows = append(rows, dr, rr)
	}
	return rows, nil
}
