package sandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"runtime"

	"github.com/fluffy-waffle/fluffy/lib/uerr"
)

// CodeNotRunnable: a plugin binary cannot run in the empty L2 image.
const CodeNotRunnable = "PLUGIN_BINARY_NOT_RUNNABLE"

// staticBuildFix is how to build a Go plugin that runs in the empty image.
const staticBuildFix = "build it as a static binary for this machine: `CGO_ENABLED=0 go build -o %s .` " +
	"(the Makefile of `fluffy plugin new` does), then stamp its sha256 with `fluffy plugin stamp DIR`"

// CheckRunnable reports whether the ELF binary at path can run in an L2
// sandbox, whose image is empty: no dynamic loader, no libc, no shell. It
// must be built for this machine's architecture and have no interpreter
// (PT_INTERP). Without this check a dynamically linked plugin (cgo is on by
// default) fails inside the container as "exec ...: no such file or
// directory", which names neither the cause nor the fix. A file that is not
// ELF is left to the launcher (it fails to start and says so); CheckELF
// refuses it too, for tools that prepare a binary (plugin stamp).
func CheckRunnable(plugin, path string) error {
	return checkELF(plugin, path, false)
}

// CheckELF is CheckRunnable that also refuses a file that is not ELF.
func CheckELF(plugin, path string) error {
	return checkELF(plugin, path, true)
}

func checkELF(plugin, path string, requireELF bool) error {
	f, err := elf.Open(path)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) {
			if !requireELF {
				return nil
			}
			return uerr.New(CodeNotRunnable, fmt.Sprintf("the entry binary of %s is not an ELF executable", plugin),
				"the L2 sandbox image is empty (no shell, no interpreter), so only a native executable can run in it",
				fmt.Sprintf(staticBuildFix, plugin))
		}
		return uerr.Wrap(err, CodeNotRunnable, fmt.Sprintf("cannot read the entry binary of %s", plugin), err.Error(), "check the manifest's entry and that the binary was built")
	}
	defer f.Close()
	if want := elfMachine(runtime.GOARCH); want != elf.EM_NONE && f.Machine != want {
		return uerr.New(CodeNotRunnable, fmt.Sprintf("the entry binary of %s is built for %s, this machine runs %s", plugin, f.Machine, runtime.GOARCH),
			"a sandbox runs binaries of the host's architecture only", fmt.Sprintf(staticBuildFix, plugin)+" (with GOARCH="+runtime.GOARCH+")")
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return uerr.New(CodeNotRunnable, fmt.Sprintf("the entry binary of %s is dynamically linked", plugin),
				"the L2 sandbox image is empty: there is no dynamic loader or libc in it, so the binary cannot start there (cgo is on by default when a C compiler is installed)",
				fmt.Sprintf(staticBuildFix, plugin))
		}
	}
	return nil
}

func elfMachine(goarch string) elf.Machine {
	switch goarch {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	case "386":
		return elf.EM_386
	case "arm":
		return elf.EM_ARM
	case "riscv64":
		return elf.EM_RISCV
	case "ppc64le", "ppc64":
		return elf.EM_PPC64
	case "s390x":
		return elf.EM_S390
	}
	return elf.EM_NONE
}
