// Package atomicfile owns the one way fluffy replaces a file: the new bytes
// go to a temporary file in the same directory, are synced, take their
// permissions, and are renamed over the old name; then the directory is
// synced. A reader sees the old file or the new one, never part of either,
// and a failure leaves the old file and no temporary behind.
//
// It is a leaf: it imports only the standard library, so the kernel, the
// CLI and the builtin plugins share it. It does not create directories,
// take locks (git's lock-file protocol is not this), or decide what may be
// written where: confinement is the caller's (pass an *os.Root to stay
// inside one directory tree).
package atomicfile
