// Package uerr owns the one user-facing error shape every part of fluffy
// reports through: what happened, why, and how to fix it.
//
// Errors a plugin reports are built with FromPlugin: their codes live in
// the plugin's namespace and their text is escaped, bounded and shown as
// the plugin's.
//
// It must not import any other fluffy package but the leaf textsafe:
// everything else imports it.
package uerr
