package main

import (
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

	"github.com/fluffy-waffle/fluffy/lib/textsafe"

	"github.com/hashicorp/go-hclog"

	"github.com/fluffy-waffle/fluffy/host/agent"
	"github.com/fluffy-waffle/fluffy/host/daemon"
	"github.com/fluffy-waffle/fluffy/host/ipc"
)

// cliSuite measures the CLI figures with the built bin/fluffy:
// cold start of the kernel process to its first answered ping (local, and
// in its L1 container through the CLI's own bootstrap), `fluffy kernel
// status` against a running kernel, the IPC ping round trip, and how many
// task events a second the IPC channel carries to a JSON consumer.
func cliSuite(cfg config, progress func(string)) ([]Row, error) {
	exe, err := filepath.Abs(filepath.Join(cfg.bin, "fluffy"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(exe); err != nil {
		return nil, fmt.Errorf("no %s (run `make build` first): %w", exe, err)
	}
	project, err := os.MkdirTemp("", "fluffy-bench-cli")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(project)
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	sock := daemon.PathsFor(home, project).Socket
	environ := append(os.Environ(), "FLUFFY_HOME="+home)

	progress(fmt.Sprintf("`fluffy kernel` (local process) exec to first ping x%d", cfg.samples))
	var local, status, pings []time.Duration
	for i := range cfg.samples {
		cmd := exec.Command(exe, "kernel", "--project", project)
		cmd.Env, cmd.Dir = environ, project
		logf, err := os.Create(filepath.Join(home, fmt.Sprintf("kernel%d.log", i)))
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			logf.Close()
			return nil, err
		}
		cl, err := waitPing(sock, 60*time.Second)
		d := time.Since(t0)
		logf.Close()
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			log, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("kernel did not answer: %v\n%s", err, log)
		}
		local = append(local, d)
		if i == 0 {
			progress(fmt.Sprintf("`fluffy kernel status` exec x%d and 1000 pings", cfg.samples))
			for range cfg.samples {
				st := exec.Command(exe, "kernel", "status", "--project", project)
				st.Env, st.Dir = environ, project
				t1 := time.Now()
				if out, err := st.CombinedOutput(); err != nil {
					return nil, fmt.Errorf("fluffy kernel status: %v: %s", err, out)
				}
				status = append(status, time.Since(t1))
			}
			for range 1000 {
				rtt, err := cl.Ping(context.Background())
				if err != nil {
					return nil, err
				}
				pings = append(pings, rtt)
			}
		}
		_, _ = cl.Call(context.Background(), "kernel.shutdown", nil, nil)
		cl.Close()
		if err := waitExit(cmd, 30*time.Second); err != nil {
			return nil, err
		}
	}
	lr := stats("cli", "`fluffy kernel` local process: exec to first ping", local, "ms")
	sr := stats("cli", "`fluffy kernel status` exec (kernel running)", status, "ms")
	pr := stats("cli", "IPC ping round trip (1000 pings, one client)", pings, "µs")
	verdict(&pr, 200)
	rows := []Row{lr, sr, pr}

	// Through the CLI's bootstrap: a one-shot task command starts the
	// kernel (as a local process, or in its L1 container); ready is the
	// kernel's first answered ping. The task itself is not the point (it
	// has no provider configured) and the CLI is killed once ready.
	for _, l1 := range []string{"none", "docker"} {
		progress(fmt.Sprintf("bootstrap --l1 %s: one-shot CLI exec to kernel ready x%d", l1, cfg.samples))
		r := startRow("`fluffy --l1 "+l1+" TASK`: exec to kernel ready (bootstrap)", cfg.samples, progress,
			func() (time.Duration, error) { return bootstrapReady(exe, environ, project, sock, l1) })
		if l1 == "docker" && r.N > 0 {
			r.Baseline = "`fluffy --l1 none TASK`: exec to kernel ready (bootstrap)"
		}
		rows = append(rows, r)
	}

	// The targets are "cold start to prompt": the REPL on a
	// terminal, from exec until its prompt is on the screen, every sample
	// with no kernel running. Targets: < 300 ms with --l1 none, < 1.5 s
	// with L1 (its image already built).
	for _, l1 := range []string{"none", "docker"} {
		progress(fmt.Sprintf("REPL --l1 %s: exec to prompt on a terminal x%d", l1, cfg.samples))
		r := startRow("`fluffy --l1 "+l1+"` (REPL): exec to prompt, no kernel running", cfg.samples, progress,
			func() (time.Duration, error) { return replPrompt(exe, environ, project, sock, l1) })
		switch {
		case r.N == 0:
		case l1 == "docker":
			r.Baseline = "`fluffy --l1 none` (REPL): exec to prompt, no kernel running"
			verdict(&r, 1500)
		default:
			verdict(&r, 300)
		}
		rows = append(rows, r)
	}

	progress(fmt.Sprintf("IPC event stream: 100 000 task events to a JSON consumer x%d", cfg.samples))
	tp, err := eventThroughput(cfg.samples, 100000)
	if err != nil {
		return nil, err
	}
	return append(rows, tp), nil
}

// startRow takes samples of one start measurement; the first failure ends
// it and the row says NOT MEASURED with why.
func startRow(name string, samples int, progress func(string), measure func() (time.Duration, error)) Row {
	var ds []time.Duration
	for range samples {
		d, err := measure()
		if err != nil {
			progress(fmt.Sprintf("  %s not measured: %v", name, err))
			return Row{Suite: "cli", Name: name + ": NOT MEASURED (" + textsafe.Cap(err.Error(), 120) + ")", Unit: "ms"}
		}
		ds = append(ds, d)
	}
	return stats("cli", name, ds, "ms")
}

// waitPing dials sock until a ping is answered.
func waitPing(sock string, budget time.Duration) (*ipc.Client, error) {
	deadline := time.Now().Add(budget)
	var last error = errors.New("no socket")
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		cl, err := ipc.Dial(ctx, sock, 0)
		if err == nil {
			if _, err = cl.Ping(ctx); err == nil {
				cancel()
				return cl, nil
			}
			cl.Close()
		}
		cancel()
		last = err
		time.Sleep(2 * time.Millisecond)
	}
	return nil, fmt.Errorf("no ping answered on %s within %v: %v", sock, budget, last)
}

func waitExit(cmd *exec.Cmd, budget time.Duration) error {
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	select {
	case <-ch:
		return nil
	case <-time.After(budget):
		_ = cmd.Process.Kill()
		<-ch
		return fmt.Errorf("%s did not exit within %v of kernel.shutdown", cmd.Path, budget)
	}
}

// bootstrapReady runs `fluffy --l1 L1 --json TASK` until the kernel it
// starts answers a ping, then stops the CLI and shuts the kernel down.
func bootstrapReady(exe string, environ []string, project, sock, l1 string) (time.Duration, error) {
	cmd := exec.Command(exe, "--l1", l1, "--json", "--project", project, "say hello")
	cmd.Env, cmd.Dir = environ, project
	out, err := os.CreateTemp("", "fluffy-bench-cli-out")
	if err != nil {
		return 0, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	cl, err := waitPing(sock, 90*time.Second)
	d := time.Since(t0)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if werr := waitExit(cmd, 20*time.Second); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		b, _ := os.ReadFile(out.Name())
		return 0, fmt.Errorf("%v; CLI output: %s", err, textsafe.Cap(string(b), 400))
	}
	_, _ = cl.Call(context.Background(), "kernel.shutdown", nil, nil)
	cl.Close()
	// Wait for the socket to go away before the next start.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err != nil {
			if l1 == "docker" {
				removeL1(sock)
			}
			return d, nil
		}
	}
	return 0, fmt.Errorf("the kernel did not remove %s within 30 s of kernel.shutdown", sock)
}

// removeL1 removes the exited L1 containers of this run's project (the
// bootstrap names them fluffy-l1-<socket id>-<random>; they stay after the
// kernel exits).
func removeL1(sock string) {
	prefix := "fluffy-l1-" + strings.TrimSuffix(filepath.Base(sock), ".sock") + "-"
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "name=^"+prefix).Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("docker", "rm", "-f", id).Run()
	}
}

// eventThroughput serves a method emitting n task events from an
// in-process daemon (the kernel's own IPC front) and reads them with an IPC
// client decoding each as agent.Event, as `fluffy --json` does.
func eventThroughput(samples, n int) (Row, error) {
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(home)
	d, err := daemon.New(daemon.Options{Home: home, Project: home, Logger: hclog.NewNullLogger()})
	if err != nil {
		return Row{}, err
	}
	defer d.Close()
	d.Handle("bench.events", func(ctx context.Context, req *ipc.Request) (any, error) {
		ev := agent.Event{Type: agent.EventTextDelta, Session: "bench", Task: "t1", Turn: 1, Text: "some streamed model text "}
		for i := range n {
			ev.Seq, ev.Time = int64(i+1), time.Now()
			if err := req.Emit(ev); err != nil {
				return nil, err
			}
		}
		return n, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = d.Serve(ctx) }()
	cl, err := waitPing(d.Paths().Socket, 10*time.Second)
	if err != nil {
		return Row{}, err
	}
	defer cl.Close()
	var rates []float64
	for range samples {
		got := 0
		var bad error
		t0 := time.Now()
		_, err := cl.Call(ctx, "bench.events", nil, func(raw json.RawMessage) {
			var ev agent.Event
			if err := json.Unmarshal(raw, &ev); err != nil && bad == nil {
				bad = err
			}
			got++
		})
		el := time.Since(t0)
		if err == nil {
			err = bad
		}
		if err != nil {
			return Row{}, err
		}
		if got != n {
			return Row{}, fmt.Errorf("the client got %d of %d events", got, n)
		}
		rates = append(rates, float64(n)/el.Seconds())
	}
	// Rates: higher is better, so p50 is the median and p90/p99 the
	// slower tail (the lower rates).
	sortFloats(rates)
	q := func(p float64) float64 { return rates[int((1-p)*float64(len(rates)-1))] }
	return Row{Suite: "cli", Name: fmt.Sprintf("IPC event stream to a JSON consumer (%d events a call)", n), Unit: "events/s", N: len(rates), P50: q(0.5), P90: q(0.9), P99: q(0.99)}, nil
}

func sortFloats(f []float64) {
	for i := 1; i < len(f); i++ {
		for j := i; j > 0 && f[j] < f[j-1]; j-- {
			f[j], f[j-1] = f[j-1], f[j]
		}
	}
}
