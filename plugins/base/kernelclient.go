package base

import (
	"context"
	"math"
	"time"

	kernelpb "github.com/fluffy-waffle/fluffy/plugins/kernel/proto"
)

// Capability is a token the kernel issued to this plugin instance.
type Capability struct {
	TokenID string
	Expires time.Time
}

// TokenUse presents a capability token with a request: its id and a nonce
// larger than the last one used with that token (a replayed or reused
// nonce is refused).
type TokenUse struct {
	TokenID string
	Nonce   uint64
}

// KernelClient is how a plugin calls back into the kernel. The kernel binds
// every call to the plugin instance whose broker carried it.
type KernelClient interface {
	// RequestCapability asks for a token for syscall on exactly the path
	// pathGlob names (matched literally), for at most maxOps operations
	// (0: one) within ttl (0: 30 s). The kernel refuses more than 1000
	// operations, more than 5 minutes or a 65th live token, and an instance
	// may ask a few times a second.
	RequestCapability(ctx context.Context, syscall, pathGlob string, maxOps int, ttl time.Duration) (Capability, error)
	ReadFile(ctx context.Context, path string, maxBytes int64) (content []byte, sha256 string, err error)
	// ReadFileWithToken is ReadFile under a token from RequestCapability
	// (syscall fs.read): the kernel accepts it only from the instance it
	// was issued to, for that path, unexpired, with operations left and a
	// fresh nonce, and then skips the policy's YAML and extension rules
	// (built-in protections still apply). Any other token is refused with
	// KERNEL_TOKEN_INVALID; nothing falls back to a token-less read.
	ReadFileWithToken(ctx context.Context, path string, maxBytes int64, use TokenUse) (content []byte, sha256 string, err error)
	ReportProgress(ctx context.Context, message string, fraction float64) error
}

type kernelClient struct{ c kernelpb.KernelClient }

// NewKernelClient wraps a raw gRPC kernel client (pluginsdk tests use it).
func NewKernelClient(c kernelpb.KernelClient) KernelClient { return &kernelClient{c: c} }

func (k *kernelClient) RequestCapability(ctx context.Context, syscall, glob string, maxOps int, ttl time.Duration) (Capability, error) {
	r, err := k.c.RequestCapability(ctx, &kernelpb.CapabilityRequest{
		// Saturated, not wrapped: 2^31 must reach the kernel as too many,
		// not as a negative count.
		Syscall: syscall, PathGlob: glob, MaxOps: int32(min(max(maxOps, math.MinInt32), math.MaxInt32)), TtlMs: ttl.Milliseconds(),
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
	return k.readFile(ctx, &kernelpb.ReadFileRequest{Path: path, MaxBytes: maxBytes})
}

func (k *kernelClient) ReadFileWithToken(ctx context.Context, path string, maxBytes int64, use TokenUse) ([]byte, string, error) {
	return k.readFile(ctx, &kernelpb.ReadFileRequest{Path: path, MaxBytes: maxBytes, TokenId: use.TokenID, TokenNonce: use.Nonce})
}

func (k *kernelClient) readFile(ctx context.Context, req *kernelpb.ReadFileRequest) ([]byte, string, error) {
	r, err := k.c.ReadFile(ctx, req)
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
