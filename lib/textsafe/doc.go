// Package textsafe owns the one escaping function for untrusted text
// (plugin output, progress and errors, syscall strings from plugins, model
// text) before it reaches a terminal or a log: control characters, escape
// sequences, invalid UTF-8 and bidirectional overrides become visible
// escapes, and the length is bounded with a marker saying how much was cut.
//
// It imports nothing from fluffy (uerr builds on it) and must not: it is a
// leaf every layer can use.
package textsafe
