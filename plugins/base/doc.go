// Package base owns what every fluffy plugin has in common, whatever its
// kind: the go-plugin handshake (magic cookie and the supported API range),
// the Info/Configure/Health service, the mapping between uerr and the wire
// Error message, and the kernel-callback plumbing over the GRPCBroker.
//
// It must not import host/ or any kind package; kinds build on it.
package base
