// Command ticker is the scheduler tests' container workload. It counts in
// <dir>/count every 20 ms, answers SIGUSR1 (the tests' PAUSE_SIGNAL) by
// writing <dir>/pause-ack and SIGUSR2 (RESUME_SIGNAL) by <dir>/resume-ack,
// and exits on SIGTERM.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func write(dir, name string, n int) {
	tmp := filepath.Join(dir, "."+name)
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(n)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	_ = os.Rename(tmp, filepath.Join(dir, name))
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ticker DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(20 * time.Millisecond)
	n := 0
	for {
		select {
		case <-tick.C:
			n++
			write(dir, "count", n)
		case s := <-sig:
			switch s {
			case syscall.SIGUSR1:
				write(dir, "pause-ack", n)
			case syscall.SIGUSR2:
				write(dir, "resume-ack", n)
			default:
				os.Exit(0)
			}
		}
	}
}
