// Package kernel owns the contract of the callback service the kernel
// exposes back to plugins through the GRPCBroker: capability requests,
// reads through the kernel, progress reports.
//
// It holds the server shim only; the kernel supplies the Service
// implementation, and plugins reach it through base.KernelClient. It must
// not import host/.
package kernel
