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

here = os.path.dirname(os.path.abspath(__file__))
for name, sf in (("parseconfig.jsonl", False), ("parseconfig-source-first.jsonl", True)):
    with open(os.path.join(here, name), "w") as f:
        for tn in script(sf):
            f.write(json.dumps(tn, separators=(",", ":")) + "\n")
