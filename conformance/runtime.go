package conformance

import "context"

// ReasonNoRuntimeKind is the skip reason of the runtime profile while the
// kernel has no runtime protocol shim.
const ReasonNoRuntimeKind = "the runtime plugin kind is not available in this kernel build"

func runtimeChecks() map[string]checkFunc {
	skipAll := func(context.Context, *probe) outcome { return skip(ReasonNoRuntimeKind) }
	return map[string]checkFunc{
		"RUNTIME-LIFECYCLE-001": skipAll,
		"RUNTIME-LIMITS-001":    skipAll,
		"RUNTIME-LABELS-001":    skipAll,
		"RUNTIME-CLEANUP-001":   skipAll,
	}
}
