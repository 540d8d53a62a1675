// Package store owns the one badger database of a project (by default
// <project>/.fluffy/db): the badger options fluffy runs with, opening and
// closing it, detecting a damaged database before badger touches it, and
// recovering from that damage (quarantine the files, salvage every readable
// key into a fresh database, report what happened).
//
// Opening takes a lock file beside the directory (<dir>.lock) before
// anything reads the files, and writes a holder record (HolderFile: pid,
// host, project, command) that a STORE_LOCKED error of another process
// names. Shared is a database that several processes use in turn, each
// opening it per operation under a bounded wait (the home database).
//
// Writes go through DB.Update and DB.WriteBatch only (there is no badger
// handle to write past them): a disk guard refuses them with DISK_FULL
// once the file system has less than Reserve free, because badger writes
// through memory maps of sparse files and a full disk is a SIGBUS, not an
// error. Close on such a disk leaves badger unflushed (its log is replayed
// at the next open). See docs/decisions/disk-guard.md.
//
// Several packages keep their data in this one database, each under its own
// key prefix (see the Prefix constants): host/audit, host/state (sessions and
// the workflow machine), host/registry. store never interprets their keys or
// values; it must not import any of them, and it must not decide what a
// recovered database means for the data in it — callers read Recovery() and
// react (host/audit records an audit_chain_break and starts a new segment).
package store
