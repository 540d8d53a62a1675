// Package sandbox owns L2: the Runtime interface, templates, seccomp profiles, output volumes, the go-plugin runner that starts a plugin inside a container, and the orphan reaper. It must not speak to a container engine directly; that is the runtime adapter plugin's job.
package sandbox
