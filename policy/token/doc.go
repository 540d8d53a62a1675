// Package token owns capability tokens:
// short-lived, operation-level grants bound to one plugin instance and one
// peer (pid, container id), scoped by syscall, path globs, a maximum number
// of operations and a TTL (default 30 s). Every use carries a nonce that
// must be larger than the last accepted one, so a captured use cannot be
// replayed. Validation is a map lookup plus constant work, and takes the
// caller's time snapshot so that a decision never reads the clock twice.
//
// It must not decide whether a token may be issued: that is the policy
// engine's evaluation; this package only keeps and checks grants.
package token
