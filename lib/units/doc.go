// Package units owns the strict size and duration notations of policy files
// and plugin manifests; it is fluffy's one
// unit parser: sizes in IEC (KiB, MiB, GiB) or SI (KB,
// MB, GB) units or plain bytes, durations in ms, s, m or h. Case-sensitive,
// whole numbers only, no guessing. It must not know about files or lines:
// callers add where the value came from.
package units
