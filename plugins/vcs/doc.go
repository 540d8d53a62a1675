// Package vcs owns the VCS-kind contract (status, diff, commit, log) and
// its go-plugin shim. One proto serves plugin API v1 and v2.
//
// It must not import host/.
package vcs
