// Package main is a tiny server configuration loader: the project fluffy's
// demo changes. parseConfig reads "key=value" lines; today it silently
// ignores everything it cannot understand.
package main

import (
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
// skipped). It never reports a problem: a bad port becomes 0, an unknown
// key is dropped, a line without "=" is ignored.
func parseConfig(data string) (Config, error) {
	cfg := Config{Host: "localhost", Port: 8080, Timeout: 30 * time.Second}
	for _, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, _ := strings.Cut(line, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch key {
		case "host":
			cfg.Host = value
		case "port":
			cfg.Port, _ = strconv.Atoi(value)
		case "timeout":
			cfg.Timeout, _ = time.ParseDuration(value)
		case "debug":
			cfg.Debug, _ = strconv.ParseBool(value)
		}
	}
	return cfg, nil
}
