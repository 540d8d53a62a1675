// Package diskfree owns fluffy's one free-space check: before the kernel
// opens its stores (badger dies with SIGBUS when a write finds the disk
// full) and before a sandbox that may write up to its quota starts, the
// filesystem must have what will be written plus Reserve free, or the
// caller stops with a DISK_FULL error naming the path and the space
// needed. It must not decide quotas (the sandbox templates do).
package diskfree
