package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/fluffy-waffle/fluffy/lib/nearest"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// Version is the fluffy release; overridden at link time by `make build`.
var Version = "0.1.0-dev"

// env is what every subcommand receives instead of reaching for globals.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	log    hclog.Logger
	// home is $FLUFFY_HOME (default ~/.fluffy).
	home string
	// getenv is os.Getenv in production; tests substitute a map.
	getenv func(string) string
	// isTTY reports whether stdin is an interactive terminal.
	isTTY bool
}

func main() {
	os.Exit(run(os.Args[1:], newEnv()))
}

func newEnv() *env {
	e := &env{
		stdin:  os.Stdin,
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
		isTTY:  stdinIsTTY(),
	}
	e.log = hclog.New(&hclog.LoggerOptions{
		Name:   "fluffy",
		Level:  hclog.LevelFromString(envOr(e.getenv, "FLUFFY_LOG_LEVEL", "warn")),
		Output: os.Stderr,
	})
	e.home = fluffyHome(e.getenv)
	return e
}

func envOr(get func(string) string, key, def string) string {
	if v := get(key); v != "" {
		return v
	}
	return def
}

func fluffyHome(get func(string) string) string {
	if h := get("FLUFFY_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".fluffy")
	}
	return ".fluffy"
}

// stdinIsTTY reports whether stdin is a terminal: a character device is
// not enough (/dev/null is one, and a prompt there reads no answer).
func stdinIsTTY() bool { return isTerminal(os.Stdin) }

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// run dispatches args and returns the process exit code: 0 success, 1 a
// reported failure, 2 a usage error.
func run(args []string, e *env) int {
	if err := dispatch(e, commandTree(), args); err != nil {
		return report(e, err)
	}
	return 0
}

// nearCommand returns a command name prompt is probably a typo of: a
// single word within two edits of a command.
func nearCommand(prompt string, root *cmd) string {
	if prompt == "" || strings.ContainsAny(prompt, " \t") {
		return ""
	}
	return nearest.Name(prompt, root.subNames(), 2)
}

// exitCoder lets a command choose its exit status (e.g. conformance: 1 when a
// MUST fails) while still printing a structured error.
type exitCoder interface{ ExitCode() int }

func report(e *env, err error) int {
	if c, ok := err.(exitStatus); ok { // the command already said why
		return int(c)
	}
	ue := uerr.From(err)
	fmt.Fprint(e.stderr, ue.Render())
	e.log.Debug("command failed", "error", err)
	if ec, ok := err.(exitCoder); ok {
		return ec.ExitCode()
	}
	if ue.Code == "USAGE" {
		return 2
	}
	return 1
}

// usageErr builds the structured error for bad arguments. what often
// quotes an argument (a flag parse error does), so it is bounded and
// escaped.
func usageErr(cmd, what, fix string) error {
	return uerr.New("USAGE", textsafe.Line(what, maxQuoted), "the arguments to `"+strings.TrimSpace("fluffy "+cmd)+"` are not valid", fix)
}

// maxQuoted bounds the user's or a file's text quoted in an error.
const maxQuoted = 300
