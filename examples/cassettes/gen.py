#!/usr/bin/env python3
"""Writes parseconfig.jsonl: the scripted model turns of `make demo` and the
end-to-end tests (provider-replay plays them back). Run: python3 gen.py"""
import json, os

TEST = '''package main

import "testing"

// Every malformed line is reported instead of silently ignored.
func TestParseConfigReportsErrors(t *testing.T) {
	for _, in := range []string{"port=abc", "port=70000", "timeout=soon", "debug=maybe", "colour=blue", "just words"} {
		if _, err := parseConfig(in); err == nil {
			t.Errorf("parseConfig(%q) returned no error", in)
		}
	}
}
'''

SRC = '''// Package main is a tiny server configuration loader: the project fluffy's
// demo changes. parseConfig reads "key=value" lines.
package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config is the server's configuration.
type Config struct {
	Host    string
	Port    int
	Timeout time.Duration
	Debug   bool
}

// parseConfig parses "key=value" lines (blank lines and # comments are
// skipped). A line without "=", an unknown key or a value that does not
// parse is an error naming the line.
func parseConfig(data string) (Config, error) {
	cfg := Config{Host: "localhost", Port: 8080, Timeout: 30 * time.Second}
	for i, line := range strings.Split(data, "\\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return Config{}, fmt.Errorf("line %d: %q is not key=value", i+1, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		var err error
		switch key {
		case "host":
			cfg.Host = value
		case "port":
			cfg.Port, err = strconv.Atoi(value)
			if err == nil && (cfg.Port < 1 || cfg.Port > 65535) {
				err = fmt.Errorf("not between 1 and 65535")
			}
		case "timeout":
			cfg.Timeout, err = time.ParseDuration(value)
		case "debug":
			cfg.Debug, err = strconv.ParseBool(value)
		default:
			return Config{}, fmt.Errorf("line %d: unknown key %q", i+1, key)
		}
		if err != nil {
			return Config{}, fmt.Errorf("line %d: bad %s %q: %v", i+1, key, value, err)
		}
	}
	return cfg, nil
}
'''

def call(cid, name, args):
    a = json.dumps(args)
    half = len(a) // 2
    return [
        {"tool_call_start": {"call_id": cid, "name": name}},
        {"tool_call_delta": {"call_id": cid, "arguments_delta": a[:half]}},
        {"tool_call_delta": {"call_id": cid, "arguments_delta": a[half:]}},
        {"tool_call_end": {"call_id": cid, "name": name, "arguments": args}},
    ]

def turn(n, text, calls, inp, out, stop="tool_use"):
    ev = []
    for chunk in text.split(" "):
        ev.append({"text_delta": chunk + " "})
    for c in calls:
        ev += call(*c)
    ev.append({"usage": {"input_tokens": inp, "output_tokens": out}})
    ev.append({"done": {"stop_reason": stop, "model": "replay"}})
    return {"turn": n, "events": ev}

def script(source_first):
    t = []
    n = 1
    t.append(turn(n, "Let me look at the code first.", [("c1", "fs.read", {"path": "src/config.go"}), ("c2", "fs.read", {"path": "src/config_test.go"})], 1800, 60)); n += 1
    t.append(turn(n, "parseConfig drops every error. Plan: add a test that feeds it bad lines, see it fail, then return errors that name the line.",
                  [("c3", "plan.complete", {"plan": "1. src/config_errors_test.go: bad port, out-of-range port, bad timeout, bad bool, unknown key, line without '=' must each return an error (fails today).\n2. src/config.go: return an error naming the line for each case.\n3. Run the tests: red, then green."})], 2600, 140)); n += 1
    if source_first:
        t.append(turn(n, "I'll change parseConfig directly.", [("c4", "fs.write", {"path": "src/config.go", "content": SRC})], 3100, 700)); n += 1
        t.append(turn(n, "Strict mode wants the failing test first. Writing it now.", [("c5", "fs.write", {"path": "src/config_errors_test.go", "content": TEST}), ("c6", "test.run", {})], 3600, 260)); n += 1
    else:
        t.append(turn(n, "First the failing test.", [("c5", "fs.write", {"path": "src/config_errors_test.go", "content": TEST}), ("c6", "test.run", {})], 3100, 260)); n += 1
    t.append(turn(n, "Red as expected: parseConfig accepts every bad line. Now the fix.", [("c7", "fs.write", {"path": "src/config.go", "content": SRC}), ("c8", "test.run", {})], 4200, 720)); n += 1
    t.append(turn(n, "All tests pass. parseConfig now reports malformed lines, unknown keys and bad values with the line number.", [], 5200, 40, stop="end_turn")); n += 1
    return t

def cancel_script():
    """The REPL test's conversation: the person presses Ctrl-C during the
    first test run, then types "continue"; the merge goes to review."""
    t = []
    t.append(turn(1, "Planning.", [("c1", "plan.complete", {"plan": "1. A failing test for malformed lines. 2. Return errors naming the line. 3. Red, then green."})], 1500, 50))
    t.append(turn(2, "First the failing test.", [("c2", "fs.write", {"path": "src/config_errors_test.go", "content": TEST}), ("c3", "test.run", {})], 2100, 260))
    t.append(turn(3, "Running the tests again.", [("c4", "test.run", {})], 2600, 30))
    t.append(turn(4, "Red as expected. Now the fix.", [("c5", "fs.write", {"path": "src/config.go", "content": SRC}), ("c6", "test.run", {})], 3300, 720))
    t.append(turn(5, "Done: parseConfig reports malformed lines.", [], 4000, 20, stop="end_turn"))
    return t

here = os.path.dirname(os.path.abspath(__file__))
for name, turns in (("parseconfig.jsonl", script(False)), ("parseconfig-source-first.jsonl", script(True)), ("parseconfig-cancel.jsonl", cancel_script())):
    with open(os.path.join(here, name), "w") as f:
        for tn in turns:
            f.write(json.dumps(tn, separators=(",", ":")) + "\n")
