// Package audit owns the hash-chained audit log on badger. It must not decide policy or interpret events beyond their chain.
package audit
