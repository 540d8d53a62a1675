// Package archdoc holds the check that docs/architecture.md's package table
// lists exactly the module's packages, so the map cannot drift from the
// code. It has no code of its own and must not grow any.
package archdoc
