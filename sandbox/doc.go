// Package sandbox owns L2: the Runtime interface the kernel uses to drive a
// container engine (implemented by a `runtime` plugin client), the sandbox
// templates and their limits, the embedded seccomp profiles, the base image,
// the launchers that start a go-plugin plugin inside a container (Containers)
// or a bubblewrap jail (Bwrap, and AdapterJail for runtime adapters), the
// per-plugin CONNECT proxy for the ai-provider template, the container
// lifecycle (CREATING → RUNNING → STOPPING → CLEANUP → DESTROYED | FAILED),
// kernel leases, and the orphan reaper behind `fluffy sandbox ls|gc`.
//
// It must not speak to a container engine directly (that is the runtime
// adapter plugin's job), must not decide whether a sandbox may be created
// (policy's job), and must not merge outputs into the project (host/merge).
// The hard settings (no new privileges, read-only rootfs, non-root user, all
// capabilities dropped, no engine socket inside L2) are constants here, not
// options.
package sandbox
