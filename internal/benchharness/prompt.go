package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/fluffy-waffle/fluffy/host/ipc"
	"github.com/fluffy-waffle/fluffy/internal/pty"
)

// replPrompt runs `fluffy --l1 L1` (the REPL) on a fresh pseudo-terminal and
// returns the time from exec to the moment its prompt ("[strict] [idle] > ") is on
// the terminal: the "cold start to prompt", as a person sees it.
// The REPL is then left with Ctrl-D and the kernel it started is shut
// down, so every sample starts cold (no kernel running).
func replPrompt(exe string, environ []string, project, sock, l1 string) (time.Duration, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return 0, err
	}
	defer master.Close()
	cmd := exec.Command(exe, "--l1", l1, "--project", project)
	cmd.Env, cmd.Dir = environ, project
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}

	var (
		mu     sync.Mutex
		screen bytes.Buffer
	)
	found := make(chan time.Time, 1)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		slave.Close()
		return 0, err
	}
	slave.Close() // the child holds its own copy
	go func() {
		buf := make([]byte, 4096)
		seen := false
		for {
			n, err := master.Read(buf)
			if n > 0 {
				mu.Lock()
				screen.Write(buf[:n])
				if !seen && bytes.Contains(screen.Bytes(), []byte("] > ")) {
					seen = true
					found <- time.Now()
				}
				mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()

	var d time.Duration
	select {
	case at := <-found:
		d = at.Sub(t0)
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		mu.Lock()
		defer mu.Unlock()
		return 0, fmt.Errorf("no prompt within 90 s; terminal: %s", textsafe.Cap(screen.String(), 400))
	}
	// Ctrl-D at an empty prompt leaves the REPL; the kernel stays up
	// (it is a daemon) and is shut down through its socket.
	_, _ = master.Write([]byte{4})
	if err := waitExit(cmd, 20*time.Second); err != nil {
		return 0, err
	}
	if err := shutdownKernel(sock, l1); err != nil {
		return 0, err
	}
	return d, nil
}

// shutdownKernel asks the kernel on sock to exit and waits for its socket
// to go away (and, for L1, removes the exited container the bootstrap
// leaves behind).
func shutdownKernel(sock, l1 string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cl, err := ipc.Dial(ctx, sock, 0); err == nil {
		_, _ = cl.Call(ctx, "kernel.shutdown", nil, nil)
		cl.Close()
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err != nil {
			if l1 == "docker" {
				removeL1(sock)
			}
			return nil
		}
	}
	return fmt.Errorf("the kernel did not remove %s within 30 s of kernel.shutdown", sock)
}
