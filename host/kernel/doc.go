// Package kernel owns wiring and lifecycle of the host kernel: init order, startup recovery, shutdown. It must not hold policy, audit or plugin logic itself; it only connects the packages that do.
package kernel
