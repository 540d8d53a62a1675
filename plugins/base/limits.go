package base

import "google.golang.org/grpc"

// Receive limits on plugin connections. go-plugin dials
// every plugin with a 2 GiB receive limit; the kernel lowers it on every
// connection it opens, so a plugin cannot make it buffer more than this
// per message, whatever it sends.
const (
	// MaxPluginMessageBytes bounds one message the kernel receives from a
	// plugin: twice the router's default output limit (2 MiB), leaving room
	// for a full output plus its changes and error in one result.
	MaxPluginMessageBytes = 4 << 20
	// MaxCallbackMessageBytes bounds one callback request a plugin sends
	// to the kernel (a path, a progress line).
	MaxCallbackMessageBytes = 64 << 10
)

// DialOptions are the go-plugin GRPCDialOptions of every plugin connection
// the kernel opens: receive at most maxRecv bytes per message (<= 0:
// MaxPluginMessageBytes). go-plugin appends them after its own options, so
// they override its 2 GiB default.
func DialOptions(maxRecv int) []grpc.DialOption {
	if maxRecv <= 0 {
		maxRecv = MaxPluginMessageBytes
	}
	return []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecv))}
}
