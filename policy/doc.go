// Package policy owns the policy engine: rule model, YAML loader, evaluation, capability tokens, and the default policy. It must not perform the actions it judges.
package policy
