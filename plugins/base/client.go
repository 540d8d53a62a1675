package base

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	basepb "github.com/fluffy-waffle/fluffy/plugins/base/proto"
)

// KernelServer registers the kernel callback service on a brokered gRPC
// server. plugins/kernel provides the implementation; base only needs the
// registration hook, which keeps the import graph one-way.
type KernelServer func(s *grpc.Server)

// Client is the kernel-side half of the Base service, embedded by every
// kind's client shim.
type Client struct {
	base    basepb.BaseClient
	broker  *plugin.GRPCBroker
	version int

	mu       sync.Mutex
	brokerID uint32
}

// NewClient builds the base client over conn. version is the negotiated API
// version of the shim that created it.
func NewClient(conn *grpc.ClientConn, broker *plugin.GRPCBroker, version int) *Client {
	return &Client{base: basepb.NewBaseClient(conn), broker: broker, version: version}
}

// APIVersion is the plugin API version this client speaks.
func (c *Client) APIVersion() int { return c.version }

// Info asks the plugin to describe itself.
func (c *Client) Info(ctx context.Context) (Info, error) {
	r, err := c.base.Info(ctx, &basepb.InfoRequest{})
	if err != nil {
		return Info{}, err
	}
	vs := make([]int, len(r.GetApiVersions()))
	for i, v := range r.GetApiVersions() {
		vs[i] = int(v)
	}
	return Info{Name: r.GetName(), Kind: Kind(r.GetKind()), Version: r.GetVersion(), APIVersions: vs}, nil
}

// Configure sends cfg. When kernel is non-nil it is served through the
// broker and its id is passed to the plugin so the plugin can call back.
func (c *Client) Configure(ctx context.Context, cfg Config, kernel KernelServer) error {
	if kernel != nil && c.broker != nil {
		c.mu.Lock()
		if c.brokerID == 0 {
			c.brokerID = c.broker.NextId()
			go c.broker.AcceptAndServe(c.brokerID, func(opts []grpc.ServerOption) *grpc.Server {
				// A plugin's callback requests are small; bound what the
				// kernel buffers per request.
				s := grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(MaxCallbackMessageBytes))...)
				kernel(s)
				return s
			})
		}
		cfg.KernelBrokerID = c.brokerID
		c.mu.Unlock()
	}
	cfg.APIVersion = c.version
	_, err := c.base.Configure(ctx, &basepb.ConfigureRequest{
		ConfigJson:     cfg.ConfigJSON,
		SessionId:      cfg.SessionID,
		InstanceId:     cfg.InstanceID,
		Workspace:      cfg.Workspace,
		OutDir:         cfg.OutDir,
		KernelBrokerId: cfg.KernelBrokerID,
		SessionMode:    cfg.SessionMode,
		ApiVersion:     int32(cfg.APIVersion),
	})
	return err
}

// Health returns nil when the plugin reports itself healthy.
func (c *Client) Health(ctx context.Context) error {
	r, err := c.base.Health(ctx, &basepb.HealthRequest{})
	if err != nil {
		return err
	}
	if !r.GetOk() {
		return fmt.Errorf("plugin reports unhealthy: %s", r.GetMessage())
	}
	return nil
}
