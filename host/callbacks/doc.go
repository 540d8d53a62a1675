// Package callbacks owns the kernel service one plugin instance reaches
// through its go-plugin broker: reading a file of its session view,
// requesting a capability token, reporting progress. Every call is
// attributed to the instance it came from, rate limited, checked against
// the capabilities its manifest declared, judged by the policy and audited.
//
// It declares what it needs of the kernel (a policy judge, an audit
// recorder, the current session view, a progress sink) and must not import
// host/kernel, the supervisor or the router: the kernel wires one Service
// per instance.
package callbacks
