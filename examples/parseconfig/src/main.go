package main

import (
	"fmt"
	"os"
)

func main() {
	data, err := os.ReadFile("server.conf")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg, err := parseConfig(string(data))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad configuration:", err)
		os.Exit(1)
	}
	fmt.Printf("serving on %s:%d (timeout %s, debug %v)\n", cfg.Host, cfg.Port, cfg.Timeout, cfg.Debug)
}
