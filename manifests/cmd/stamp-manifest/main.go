// Command stamp-manifest writes the sha256 of a freshly built plugin binary
// into its plugin.yaml, leaving every other byte of the manifest as it was,
// then checks that the result is a valid manifest whose checksum matches.
//
//	stamp-manifest -in builtin-plugins/tool-fs/plugin.yaml -bin bin/plugins/tool-fs/tool-fs -out bin/plugins/tool-fs/plugin.yaml
//
// -out defaults to -in (stamp in place). The validation uses the output
// file's directory as the plugin directory, so -bin should sit where the
// manifest's entry points. Exit status: 0 stamped, 1 failed, 2 usage error.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fluffy-waffle/fluffy/lib/atomicfile"
	"github.com/fluffy-waffle/fluffy/lib/uerr"
	"github.com/fluffy-waffle/fluffy/manifests"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stamp-manifest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "manifest to read (plugin.yaml)")
	bin := fs.String("bin", "", "plugin binary whose sha256 is stamped")
	out := fs.String("out", "", "manifest to write (default: -in)")
	noVerify := fs.Bool("no-verify", false, "only stamp; skip validating the result and comparing it with -bin's location")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *in == "" || *bin == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: stamp-manifest -in plugin.yaml -bin path/to/binary [-out plugin.yaml] [-no-verify]")
		return 2
	}
	if *out == "" {
		*out = *in
	}
	if err := stamp(*in, *bin, *out, !*noVerify); err != nil {
		fmt.Fprint(stderr, uerr.From(err).Render())
		return 1
	}
	fmt.Fprintf(stdout, "stamped %s\n", *out)
	return 0
}

func stamp(in, bin, out string, verify bool) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return uerr.Wrap(err, manifests.CodeReadFailed, "cannot read "+in, err.Error(), "check the -in path")
	}
	sum, err := manifests.FileSHA256(bin)
	if err != nil {
		return uerr.Wrap(err, manifests.CodeEntryMissing, "cannot hash "+bin, err.Error(), "build the plugin first, and check the -bin path")
	}
	stamped, err := manifests.StampSHA256(data, sum)
	if err != nil {
		return err
	}
	if verify {
		m, err := manifests.Parse(out, stamped)
		if err != nil {
			return err
		}
		// The binary may be stamped into a manifest that does not sit next to
		// it yet (stamping a source plugin.yaml); if entry exists, it must match.
		if err := m.VerifyChecksum(); err != nil && !uerr.HasCode(err, manifests.CodeEntryMissing) {
			return err
		}
	}
	if err := atomicfile.Write(out, stamped, 0o644); err != nil {
		return uerr.Wrap(err, manifests.CodeStampFailed, "cannot write "+out, err.Error(), "check that the output directory exists and is writable, and free disk space")
	}
	return nil
}
