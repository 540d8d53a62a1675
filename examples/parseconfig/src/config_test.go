package main

import (
	"testing"
	"time"
)

func TestParseConfigReadsValues(t *testing.T) {
	cfg, err := parseConfig("# server\nhost = example.org\nport=9090\ntimeout=5s\ndebug=true\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Host: "example.org", Port: 9090, Timeout: 5 * time.Second, Debug: true}
	if cfg != want {
		t.Fatalf("parseConfig = %+v, want %+v", cfg, want)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := parseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "localhost" || cfg.Port != 8080 || cfg.Timeout != 30*time.Second {
		t.Fatalf("defaults = %+v", cfg)
	}
}
