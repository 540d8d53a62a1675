// Package config owns fluffy's non-security settings and their
// hierarchy: flags > FLUFFY_* environment > project
// .fluffy/config.yaml > user ~/.fluffy/config.yaml > defaults. Every key is
// declared once in Keys with its type, default, environment variable and
// documentation; unknown keys and bad values are errors with file:line.
//
// It must not hold security settings: what a plugin, a tool or the AI may do
// is the policy's (policy.yaml, changed through policy.update). A config
// value that touches security (the session mode) is only a request the
// kernel still puts through the policy.
package config
