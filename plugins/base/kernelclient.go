package base

import (
	"context"
	"time"

	kernelpb "github.com/fluffy-waffle/fluffy/plugins/kernel/proto"
)

// Capability is a token the kernel issued to this plugin instance.
type Capability struct {
	TokenID string
	Expires time.Time
}

// KernelClient is how a plugin calls back into the kernel. The kernel binds
// every call to the plugin instance whose broker carried it.
type KernelClient interface {
	RequestCapability(ctx context.Context, syscall, pathGlob string, maxOps int, ttl time.Duration) (Capability, error)
	ReadFile(ctx context.Context, path string, maxBytes int64) (content []byte, sha256 string, err error)
	ReportProgress(ctx context.Context, message string, fraction float64) error
}

type kernelClient struct{ c kernelpb.KernelClient }

// NewKernelClient wraps a raw gRPC kernel client (pluginsdk tests use it).
func NewKernelClient(c kernelpb.KernelClient) KernelClient { return &kernelClient{c: c} }

func (k *kernelClient) RequestCapability(ctx context.Context, syscall, glob string, maxOps int, ttl time.Duration) (Capability, error) {
	r, err := k.c.RequestCapability(ctx, &kernelpb.CapabilityRequest{
		Syscall: syscall, PathGlob: glob, MaxOps: int32(maxOps), TtlMs: ttl.Milliseconds(),
	})
	if err != nil {
		return Capability{}, err
	}
	if e := errorFromKernel(r.GetError()); e != nil {
		return Capability{}, e
	}
	return Capability{TokenID: r.GetTokenId(), Expires: time.UnixMilli(r.GetExpiresUnixMs())}, nil
}

func (k *kernelClient) ReadFile(ctx context.Context, path string, maxBytes int64) ([]byte, string, error) {
	r, err := k.c.ReadFile(ctx, &kernelpb.ReadFileRequest{Path: path, MaxBytes: maxBytes})
	if err != nil {
		return nil, "", err
	}
	if e := errorFromKernel(r.GetError()); e != nil {
		return nil, "", e
	}
	return r.GetContent(), r.GetSha256(), nil
}

func (k *kernelClient) ReportProgress(ctx context.Context, message string, fraction float64) error {
	_, err := k.c.ReportProgress(ctx, &kernelpb.ProgressRequest{Message: message, Fraction: fraction})
	return err
}
