// Package policyext owns the policy-extension contract (policy
// extension rules, done as plugins) and its go-plugin shim. One proto
// serves plugin API v1 and v2. The kernel gives each evaluation 100 ms;
// that deadline is enforced by the policy engine, not here.
//
// It must not import host/ or policy/.
package policyext
