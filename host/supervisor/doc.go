// Package supervisor owns running plugin instances: launching them through
// a Launcher (plain subprocess or an L2 sandbox), the go-plugin handshake
// and API-version negotiation, the self-description check, lazy start,
// health checks, restarts with backoff after a crash, per-call deadlines,
// and a per-plugin circuit breaker.
//
// It does not decide which plugins exist or are enabled (host/registry) and
// does not judge calls (policy, router); it runs what it is given.
package supervisor
