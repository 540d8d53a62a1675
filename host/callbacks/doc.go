// Package callbacks owns the service a plugin instance calls back into the
// kernel through (its GRPCBroker): capability tokens, file reads from the
// plugin's own view, progress lines, each attributed to the instance, judged
// by the policy, rate limited and audited. It must not wire the kernel, start
// plugins or hold policy rules itself: the kernel hands it the policy engine,
// the auditor and the session views through the interfaces declared here.
package callbacks
