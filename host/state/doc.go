// Package state owns the TDD workflow machine and the session store. It must not call plugins.
package state
