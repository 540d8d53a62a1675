package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/kernel"
	"github.com/fluffy-waffle/fluffy/host/scheduler"
	"github.com/fluffy-waffle/fluffy/host/task"
	"github.com/fluffy-waffle/fluffy/plugins/provider"
	"github.com/fluffy-waffle/fluffy/plugins/provider/cassette"
)

// taskEnv is an in-process kernel on a fresh git copy of
// examples/parseconfig whose provider (provider-replay) replays a cassette:
// the same path host/kernel/task_test.go tests, with the plugins `make
// build` put under cfg.bin/plugins.
type taskEnv struct {
	k     *kernel.Kernel
	tasks *task.Tasks
	ws    string
	home  string
	keep  bool
}

// taskDirs, when given to openTaskEnv, are a home and a project path to
// reuse: the project is copied afresh to the same path and the home (its
// per-project build cache) is kept, so a later task finds warm builds.
type taskDirs struct{ home, ws string }

// openTaskEnv opens the kernel; close it with env.close.
// sched sets the scheduler's limits (zero: its defaults). The
// extra files bench/fNNN.txt are added to the project (synthetic sessions
// read each once: the futility check stops a task repeating a call).
func openTaskEnv(cfg config, cassetteData []byte, extra int, sched scheduler.Config, reuse *taskDirs) (*taskEnv, error) {
	plugins, err := filepath.Abs(filepath.Join(cfg.bin, "plugins"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(plugins, "provider-replay", "plugin.yaml")); err != nil {
		return nil, fmt.Errorf("no built provider-replay under %s (run `make build` first): %w", plugins, err)
	}
	adapter := os.Getenv("FLUFFY_RUNTIME_ADAPTER")
	if adapter == "" {
		adapter = filepath.Join(plugins, "runtime-docker", "runtime-docker")
	}
	var ws, home string
	if reuse != nil {
		ws, home = reuse.ws, reuse.home
		if err := os.RemoveAll(ws); err != nil {
			return nil, err
		}
	} else {
		if ws, err = os.MkdirTemp("", "fluffy-bench-task"); err != nil {
			return nil, err
		}
		if home, err = os.MkdirTemp("", "fh"); err != nil {
			os.RemoveAll(ws)
			return nil, err
		}
	}
	if err := copyTree("examples/parseconfig", ws); err != nil {
		os.RemoveAll(ws)
		return nil, fmt.Errorf("copy examples/parseconfig (run the harness from the repository root): %w", err)
	}
	if extra > 0 {
		if err := os.MkdirAll(filepath.Join(ws, "bench"), 0o755); err != nil {
			return nil, err
		}
		for i := range extra {
			body := fmt.Sprintf("bench file %d\n%s", i, bytes.Repeat([]byte("some text of a project file\n"), 40))
			if err := os.WriteFile(filepath.Join(ws, benchFile(i)), []byte(body), 0o644); err != nil {
				return nil, err
			}
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "parseconfig"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@example.com", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(ws)
			return nil, fmt.Errorf("git %v: %v: %s", args, err, out)
		}
	}
	pcfg, _ := json.Marshal(map[string]string{"cassette": string(cassetteData)})
	env := map[string]string{"FLUFFY_RUNTIME_ADAPTER": adapter, "DOCKER_HOST": os.Getenv("DOCKER_HOST")}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: os.Stderr})
	ctx := context.Background()
	k, err := kernel.Open(ctx, kernel.Options{Home: home, Workspace: ws, SessionID: "bench", Logger: log,
		Getenv: func(k string) string { return env[k] }, BuiltinDirs: []string{plugins},
		PluginConfig: map[string][]byte{"provider-replay": pcfg}, StartTimeout: 2 * time.Minute, Scheduler: sched})
	if err != nil {
		os.RemoveAll(ws)
		os.RemoveAll(home)
		return nil, err
	}
	tasks, err := k.OpenTasks(ctx, task.Options{Provider: "provider-replay", Model: "replay", Logger: log})
	if err != nil {
		k.Close()
		os.RemoveAll(ws)
		os.RemoveAll(home)
		return nil, err
	}
	return &taskEnv{k: k, tasks: tasks, ws: ws, home: home, keep: reuse != nil}, nil
}

// close closes the kernel; it removes the directories unless they were
// given to reuse (removeDirs does).
func (e *taskEnv) close() {
	e.tasks.Close()
	e.k.Close()
	if !e.keep {
		e.removeDirs()
	}
}

func (e *taskEnv) removeDirs() {
	os.RemoveAll(e.ws)
	os.RemoveAll(e.home)
}

// run runs one task and returns its events and wall time.
func (e *taskEnv) run(prompt, mode string, onEvent func(agent.Event)) ([]agent.Event, agent.DoneEvent, time.Duration, error) {
	var mu sync.Mutex
	var evs []agent.Event
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t0 := time.Now()
	done, err := e.tasks.Run(ctx, task.Request{Prompt: prompt, Mode: mode, Yes: true}, func(ev agent.Event) {
		mu.Lock()
		evs = append(evs, ev)
		mu.Unlock()
		if onEvent != nil {
			onEvent(ev)
		}
	})
	wall := time.Since(t0)
	mu.Lock()
	defer mu.Unlock()
	return evs, done, wall, err
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}

// toolCall is one call of a synthetic turn.
type toolCall struct{ name, args string }

// toolTurn is a synthetic cassette turn making calls.
func toolTurn(turn int, calls []toolCall) []provider.Event {
	evs := []provider.Event{{TextDelta: fmt.Sprintf("turn %d. ", turn)}}
	for i, c := range calls {
		id := fmt.Sprintf("t%dc%d", turn, i)
		toolName, a := c.name, c.args
		evs = append(evs,
			provider.Event{ToolCallStart: &provider.ToolCallStart{CallID: id, Name: toolName}},
			provider.Event{ToolCallDelta: &provider.ToolCallDelta{CallID: id, ArgumentsDelta: a}},
			provider.Event{ToolCallEnd: &provider.ToolCallEnd{CallID: id, Name: toolName, Arguments: json.RawMessage(a)}})
	}
	return append(evs, provider.Event{Usage: &provider.Usage{InputTokens: 100, OutputTokens: 10}},
		provider.Event{Done: &provider.Done{StopReason: "tool_use", Model: "replay"}})
}

// synthCassette writes a cassette: one turn per entry of calls, then a
// text-only turn ending the task.
func synthCassette(calls [][]toolCall) ([]byte, error) {
	var buf bytes.Buffer
	w := cassette.NewWriter(&buf)
	w.CheckRequests = false
	for i, c := range calls {
		if err := w.Add(provider.ChatRequest{}, toolTurn(i+1, c)); err != nil {
			return nil, err
		}
	}
	end := []provider.Event{{TextDelta: "Done reading."}, {Usage: &provider.Usage{InputTokens: 100, OutputTokens: 5}},
		{Done: &provider.Done{StopReason: "end_turn", Model: "replay"}}}
	for range 3 { // the finisher may ask once or twice more
		if err := w.Add(provider.ChatRequest{}, end); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// benchFile is the project-relative path of extra file i.
func benchFile(i int) string { return fmt.Sprintf("bench/f%03d.txt", i) }

// readCall is an fs.read of extra file i.
func readCall(i int) toolCall { return toolCall{"fs.read", `{"path":"` + benchFile(i) + `"}`} }
