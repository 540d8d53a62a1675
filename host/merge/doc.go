// Package merge owns applying reviewed output-volume diffs to the project atomically. It must not decide whether a diff is allowed.
package merge
