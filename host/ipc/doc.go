// Package ipc owns the CLI-to-kernel channel: length-prefixed JSON frames over a unix socket with peer credentials. It must not interpret requests.
package ipc
