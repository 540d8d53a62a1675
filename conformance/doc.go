// Package conformance owns the certification suite: spec items with stable IDs, per-kind profiles, and reports. It must not install or trust plugins itself; the registry records its results.
package conformance
