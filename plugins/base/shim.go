package base

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// Shim is the go-plugin glue every kind needs: on the plugin side it serves
// the Base service beside the kind's own service; on the kernel side it
// wraps the kind's client around a base.Client for the negotiated version.
// Kinds whose contract is the same in every API version use one Shim per
// version (SharedPluginSets); the tool kind has its own per-version shims.
type Shim[I Plugin] struct {
	plugin.NetRPCUnsupportedPlugin
	Impl    I
	Version int
	// Register adds the kind's service for impl to s.
	Register func(s *grpc.Server, impl I)
	// NewClient builds the kind's client around bc over conn.
	NewClient func(bc *Client, conn *grpc.ClientConn) any
}

func (p *Shim[I]) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) error {
	Register(s, p.Impl, broker)
	p.Register(s, p.Impl)
	return nil
}

func (p *Shim[I]) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return p.NewClient(NewClient(conn, broker, p.Version), conn), nil
}

// SharedPluginSets maps every requested API version to a Shim built by mk,
// under the kind's dispense name.
func SharedPluginSets[I Plugin](name string, impl I, versions []int,
	register func(*grpc.Server, I), newClient func(*Client, *grpc.ClientConn) any) map[int]plugin.PluginSet {
	sets := map[int]plugin.PluginSet{}
	for _, v := range versions {
		sets[v] = plugin.PluginSet{name: &Shim[I]{Impl: impl, Version: v, Register: register, NewClient: newClient}}
	}
	return sets
}
