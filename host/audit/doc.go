// Package audit owns the hash-chained audit log on badger: the record
// format and event types, the canonical encoding every hash is computed over,
// durable writes for security events and buffered writes for operational
// ones, chain verification (at startup over the tail, on demand over all),
// new chain segments after a break, retention by age and size, and JSONL
// export that VerifyJSONL can check on its own.
//
// It must not decide policy or interpret events beyond their chain: callers
// say what happened, audit records it faithfully (after redacting secrets
// from the summaries) and proves it was not altered. Its keys live under
// store.PrefixAudit in the project database opened by host/store.
//
// # Canonical encoding (version 1)
//
// A record is stored as its canonical encoding followed by the 32-byte
// SHA-256 of that encoding (the record's hash). The encoding is, in order:
//
//	byte      0x01 (encoding version)
//	8 bytes   id, unsigned big-endian
//	8 bytes   timestamp in ms since the Unix epoch, signed big-endian
//	32 bytes  prev_hash (raw)
//	14 strings: event_type, syscall_type, tool_name, caller, session_id,
//	          session_mode, state_machine_state, policy_decision,
//	          policy_rule_name, capability_id, deny_reason, input_summary,
//	          output_summary, sandbox_id
//	8 bytes   duration_ms, signed big-endian
//	uvarint   number of metadata entries, then each entry as key string,
//	          value string, sorted by key (bytewise)
//
// where a string is uvarint(byte length) followed by its UTF-8 bytes (text
// is made valid UTF-8 before encoding, so a JSON export round-trips exactly).
// hash = SHA-256(encoding). The encoding includes prev_hash, so each record
// commits to the whole chain before it. The first record of a chain segment
// carries metadata "genesis_ms" = the kernel start time in ms, and its
// prev_hash = SHA-256("genesis:" + that decimal number).
//
// # Keys
//
//	a/r/<id, 8 bytes big-endian>   record (so keys sort by id)
//	a/s/<id>                       marks the first record of a chain segment
//	a/m/horizon                    first id kept after retention + its prev_hash
//
// # Bounds and retention
//
// Every string field is bounded (MaxFieldBytes, deny_reason MaxReasonBytes,
// at most MaxMetadataKeys metadata entries): a longer value keeps its first
// bytes followed by "…[truncated: N bytes, sha256:HEX]" over the original.
// Retention removes records older than MaxAge, and the oldest days while
// the log is over MaxBytes — but never a record younger than MinAge: then
// it records audit_storage_critical with "blocked" and logs an error. Each
// removal is recorded as audit_archive_deleted (from_id, to_id, first_kept,
// last_hash); Verify reports the horizon it starts from (Report.Horizon)
// and, over all records, a horizon that no such record states is a break.
package audit
