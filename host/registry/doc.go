// Package registry owns the catalogue of plugins: discovery of a plugins
// directory, validation on the way in, the lifecycle states
// (DISCOVERED → REGISTERED | REJECTED → LOADED → ACTIVE → UNLOADED;
// DISABLED), installation into the plugin store
// ($FLUFFY_HOME/plugins/<name>/<version>/), removal, enable/disable, and the
// records of all of it, persisted in badger.
//
// It does not run plugins (host/supervisor does) and does not decide
// whether an install is allowed beyond the manifest's own validity and the
// user's confirmation: policy and conformance are consulted through the
// interfaces it declares.
package registry
