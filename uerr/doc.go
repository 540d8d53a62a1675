// Package uerr owns the one user-facing error shape every part of fluffy
// reports through: what happened, why, and how to fix it (seed 000 "Error
// Display Standard").
//
// It must not import any other fluffy package: everything else imports it.
package uerr
