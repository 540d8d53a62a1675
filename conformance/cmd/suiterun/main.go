// Command suiterun is the kernel side of pluginsdk/plugintest's
// Conformance: the test kit builds it and runs it rather than linking the
// runner, so a plugin author's test binary carries no kernel, badger or
// Docker client. It runs the suite on one laid-out plugin directory the way
// plugintest always has (behavioural items as a plain child process, the
// sandbox-fitness items in the L2 container, itself as the stub kernel of
// CORE-SHUTDOWN-002) and writes the report as JSON.
//
//	suiterun [-no-sandbox REASON] -json FILE DIR [PROFILE...]
//	suiterun stub-kernel BINARY KIND SHA256 WORKSPACE
//
// Exit status: 0 when the report was written, whatever its verdict;
// 3 when the L2 sandbox is unavailable (stderr says why); 2 for a usage
// error; 1 when the run could not happen.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/fluffy-waffle/fluffy/conformance"
)

// Exit codes the test kit tells apart.
const (
	exitFailed    = 1
	exitUsage     = 2
	exitNoSandbox = 3
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) > 0 && args[0] == "stub-kernel" {
		if err := conformance.StubKernelMain(args[1:], stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return exitFailed
		}
		return 0
	}
	fs := flag.NewFlagSet("suiterun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	noSandbox := fs.String("no-sandbox", "", "skip the sandbox-fitness items, saying why (the plugin is then not certified)")
	jsonOut := fs.String("json", "", "write the report as JSON to this file")
	timeout := fs.Duration("timeout", 5*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil || fs.NArg() < 1 || *jsonOut == "" {
		fmt.Fprintln(stderr, "usage: suiterun [-no-sandbox REASON] -json FILE DIR [PROFILE...]")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "conformance: cannot find this binary for the stub kernel: %v\n", err)
		return exitFailed
	}
	opts := conformance.Options{StubKernel: []string{self, "stub-kernel"}}
	if *noSandbox != "" {
		opts.SandboxReason = conformance.ReasonNoSandbox + " (" + *noSandbox + ")"
	} else {
		l2, reason, err := conformance.OpenL2(ctx, getenv, nil)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "the L2 sandbox failed to start: %v\n", err)
			return exitNoSandbox
		case l2 == nil:
			fmt.Fprintln(stderr, reason)
			return exitNoSandbox
		}
		defer l2.Close()
		opts.Sandbox = l2.Launcher
	}
	rep, err := conformance.New(opts).Run(ctx, fs.Arg(0), fs.Args()[1:])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFailed
	}
	f, err := os.Create(*jsonOut)
	if err == nil {
		err = rep.WriteJSON(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "conformance: cannot write the report: %v\n", err)
		return exitFailed
	}
	return 0
}
