package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/builtin-plugins/internal/landlock"
	"github.com/fluffy-waffle/fluffy/lib/confine"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/plugins/tool"
	"github.com/fluffy-waffle/fluffy/pluginsdk"
	"github.com/fluffy-waffle/fluffy/pluginsdk/toolpath"
)

const (
	summaryExec = "Run a program with arguments (argv, no shell: no pipes, globs or variables) in a project directory; returns exit code and capped stdout/stderr"
	schemaExec  = `{"type":"object","properties":{"argv":{"type":"array","items":{"type":"string","maxLength":32768},"minItems":1,"maxItems":256,"description":"The program and its arguments, one string each (e.g. [\"go\", \"vet\", \"./...\"]); no shell: pipes, globs and $VARS are not expanded"},"cwd":{"type":"string","maxLength":4096,"description":"Project directory to run in, relative to the project root (absent: the root)"},"timeout_seconds":{"type":"integer","minimum":1,"maximum":300,"description":"Seconds before the program is stopped (default 60, at most 300)"}},"required":["argv"],"additionalProperties":false}`

	defaultTimeout = 60 * time.Second
	maxTimeout     = 300 * time.Second
	deadlineMargin = 2 * time.Second
	maxArgBytes    = 256 << 10
	// What the model gets: stdout and stderr, head and tail.
	maxStdoutText = 8 << 10
	maxStderrText = 2 << 10
	// The full output kept in /out/<operation>/.
	maxLogBytes = 64 << 20
	logName     = "shell-output.log"
)

// refused are programs that are shells or exist to run another program:
// with them an argv is a shell line again (sh -c, env sh, xargs sh, ...).
var refused = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true, "pdksh": true, "ash": true,
	"csh": true, "tcsh": true, "fish": true, "rbash": true, "yash": true, "busybox": true, "toybox": true,
	"env": true, "xargs": true, "nice": true, "nohup": true, "timeout": true, "stdbuf": true, "setsid": true,
	"sudo": true, "su": true, "doas": true, "runuser": true, "script": true, "watch": true, "chroot": true,
	"unshare": true, "nsenter": true, "flock": true, "time": true, "command": true, "exec": true, "eval": true,
	"strace": true, "ltrace": true, "ionice": true, "chrt": true, "taskset": true, "setpriv": true, "prlimit": true,
	"systemd-run": true, "expect": true, "parallel": true,
}

func newToolSet(logger hclog.Logger) *pluginsdk.ToolSet {
	return &pluginsdk.ToolSet{
		Name:    "tool-shell",
		Version: version,
		Logger:  logger,
		Specs: []pluginsdk.ToolSpec{
			{Def: tool.Def{Name: "shell.exec", Summary: summaryExec, Parameters: json.RawMessage(schemaExec), OutputMode: tool.OutputFull}, Handler: execTool},
		},
	}
}

type execArgs struct {
	Argv           []string `json:"argv"`
	Cwd            string   `json:"cwd"`
	TimeoutSeconds int      `json:"timeout_seconds"`
}

// execResult is shell.exec's output.
type execResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Truncated: stdout or stderr was cut; the whole of both is in LogFile.
	Truncated  bool   `json:"truncated"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	LogFile    string `json:"log_file,omitempty"`
}

func argErr(what, why, fix string) error { return uerr.New("SHELL_ARGS_INVALID", what, why, fix) }

// checkArgv refuses an argv that is not a plain program invocation.
func checkArgv(argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return argErr("argv is empty", "shell.exec runs argv[0] with the rest as its arguments", `send {"argv":["go","version"]}`)
	}
	total := 0
	for i, a := range argv {
		total += len(a)
		if strings.ContainsRune(a, 0) || !utf8.ValidString(a) {
			return argErr(fmt.Sprintf("argument %d is not valid text", i), "arguments may not contain NUL bytes or invalid UTF-8", "send plain text arguments")
		}
	}
	if total > maxArgBytes {
		return argErr("the arguments are too long", fmt.Sprintf("argv is limited to %d bytes", maxArgBytes), "pass less data on the command line")
	}
	if err := refusedProgram(argv[0]); err != nil {
		return err
	}
	return nil
}

// refusedProgram checks the program's name and, when it resolves on PATH
// or as a path, the name of the file it really is (/bin/sh → dash).
func refusedProgram(p string) error {
	names := []string{filepath.Base(p)}
	if lp, err := exec.LookPath(p); err == nil {
		names = append(names, filepath.Base(lp))
		if real, err := filepath.EvalSymlinks(lp); err == nil {
			names = append(names, filepath.Base(real))
		}
	}
	for _, n := range names {
		if refused[strings.ToLower(n)] {
			return uerr.New("SHELL_PROGRAM_REFUSED", fmt.Sprintf("%s is a shell or runs other programs (%s)", p, n),
				"shell.exec takes an argument vector so that what runs is exactly what was reviewed; shells and launchers (sh, bash, env, xargs, nice, ...) would turn it back into a shell line",
				`call the program directly, e.g. {"argv":["go","test","./..."]}; pipes, globs and redirections are not available`)
		}
	}
	return nil
}

func execTool(ctx context.Context, tc *pluginsdk.ToolContext, raw json.RawMessage) (any, error) {
	var a execArgs
	if err := pluginsdk.DecodeArgs("shell.exec", raw, &a); err != nil {
		return nil, err
	}
	if err := checkArgv(a.Argv); err != nil {
		return nil, err
	}
	timeout := defaultTimeout
	if a.TimeoutSeconds != 0 {
		if a.TimeoutSeconds < 0 || time.Duration(a.TimeoutSeconds)*time.Second > maxTimeout {
			return nil, argErr(fmt.Sprintf("timeout_seconds %d is out of range", a.TimeoutSeconds), "a command may run 1 to 300 seconds", "omit it for the default of 60")
		}
		timeout = time.Duration(a.TimeoutSeconds) * time.Second
	}
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - deadlineMargin; left < timeout {
			timeout = max(left, time.Second)
		}
	}
	if tc.Workspace == "" {
		return nil, uerr.New("SHELL_NOT_CONFIGURED", "tool-shell has no workspace", "the kernel did not send a workspace in Configure", "this is a kernel bug; report it")
	}
	rel, err := toolpath.Clean(a.Cwd)
	if err != nil {
		return nil, err
	}
	root, err := toolpath.OpenRoot("tool-shell", tc.Workspace)
	if err != nil {
		return nil, err
	}
	st, err := root.Lstat(rel)
	root.Close()
	if err != nil {
		return nil, toolpath.Err(rel, err)
	}
	if !st.IsDir() {
		return nil, argErr(fmt.Sprintf("cwd %s is not a directory", rel), "the program runs in a project directory (not through a link)", "name a directory of the project, or omit cwd for the root")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locate own binary: %w", err)
	}
	scratch, err := os.MkdirTemp("", "fluffy-shell-")
	if err != nil {
		return nil, fmt.Errorf("scratch dir: %w", err)
	}
	defer os.RemoveAll(scratch)
	_ = os.Chmod(scratch, 0o755)

	res, full, err := run(ctx, append(landlock.Command(self, scratch), a.Argv...), filepath.Join(tc.Workspace, filepath.FromSlash(rel)), timeout)
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(scratch, landlock.FailedMarker)); err == nil {
		return nil, uerr.New("SHELL_START_FAILED", fmt.Sprintf("%s could not be started", a.Argv[0]), textsafe.Cap(string(b), 512),
			"check the program name (it must be on the sandbox's PATH: the policy's toolchains) and retry")
	}
	if lf, err := writeLog(tc, full); err == nil {
		res.LogFile = lf
	} else {
		tc.Logger.Warn("could not write the full output", "error", err)
	}
	return res, nil
}

// run starts argv in its own process group in dir and kills the group at
// the timeout.
func run(ctx context.Context, argv []string, dir string, timeout time.Duration) (execResult, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stdout, stderr capBuffer
	stdout.max, stderr.max = maxLogBytes/2, maxLogBytes/2
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, baseEnv()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return execResult{}, nil, fmt.Errorf("start the confining launcher: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	timedOut := false
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
		timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	res := execResult{DurationMS: time.Since(start).Milliseconds(), TimedOut: timedOut}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	default:
		return execResult{}, nil, fmt.Errorf("wait: %w", err)
	}
	if timedOut {
		res.ExitCode = -1
	}
	so, se := stdout.Bytes(), stderr.Bytes()
	res.Stdout, res.Stderr = headTail(string(so), maxStdoutText), headTail(string(se), maxStderrText)
	res.Truncated = len(res.Stdout) < len(so) || len(res.Stderr) < len(se) || stdout.dropped > 0 || stderr.dropped > 0
	full := append(append(append([]byte("--- stdout\n"), so...), "\n--- stderr\n"...), se...)
	return res, full, nil
}

// baseEnv is the sandbox's environment without the plugin protocol's
// variables or the build cache.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PLUGIN_") || strings.HasPrefix(k, "FLUFFY_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func writeLog(tc *pluginsdk.ToolContext, b []byte) (string, error) {
	if tc.OutDir == "" {
		return "", errors.New("no output directory")
	}
	op := tc.Call.OperationID
	if op == "" {
		op = tc.Call.ID
	}
	if confine.Name(op) != nil {
		return "", fmt.Errorf("operation id %q is not a directory name", op)
	}
	dir := filepath.Join(tc.OutDir, op)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return logName, os.WriteFile(filepath.Join(dir, logName), b, 0o644)
}

// capBuffer keeps the first max bytes written and counts the rest.
type capBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	n := min(max(c.max-c.buf.Len(), 0), len(p))
	c.buf.Write(p[:n])
	c.dropped += int64(len(p) - n)
	return len(p), nil
}

func (c *capBuffer) Bytes() []byte { return c.buf.Bytes() }

// headTail keeps the start and the end of s within about n bytes.
func headTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h := textsafe.Cap(s, n/2)
	t := s[len(s)-n/2:]
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	return fmt.Sprintf("%s\n[... %d bytes cut; the whole output is in log_file ...]\n%s", h, len(s)-len(h)-len(t), t)
}
