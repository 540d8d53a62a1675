// Command stubkernel is the throwaway kernel of CORE-SHUTDOWN-002 for runs
// outside the fluffy binary (pluginsdk/plugintest builds it): it starts one
// plugin, prints its pid and waits to be SIGKILLed.
package main

import (
	"fmt"
	"os"

	"github.com/fluffy-waffle/fluffy/conformance"
)

func main() {
	if err := conformance.StubKernelMain(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
