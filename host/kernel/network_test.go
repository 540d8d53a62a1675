package kernel

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluffy-waffle/fluffy/plugins/runtime"
	"github.com/fluffy-waffle/fluffy/sandbox"
)

// echoListener answers each line with "echo:" + the line.
func echoListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if l, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					fmt.Fprintf(c, "echo:%s", l)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestProxyFollowsPolicyNetworkWhitelist: the kernel's CONNECT proxy lets
// a plugin reach a host only when its manifest declares it AND the project
// policy's network_whitelist lists it; a refusal says which of the two
// refused, and a policy changed on disk applies to the next tunnel.
func TestProxyFollowsPolicyNetworkWhitelist(t *testing.T) {
	a, b, c := echoListener(t), echoListener(t), echoListener(t)
	home, ws := t.TempDir(), t.TempDir()
	pol := func(hosts ...string) string {
		return "version: 1\nnetwork_whitelist: [" + strings.Join(hosts, ", ") + "]\n"
	}
	writePolicy(t, home, ws, pol(a, c))
	ctx := context.Background()
	k, err := Open(ctx, Options{Home: home, Workspace: ws, Sandbox: SandboxNone, PolicyReloadInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	// Unix socket paths are limited to 108 bytes; t.TempDir() names are long.
	dir, err := os.MkdirTemp("", "px")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// The manifest declares a and b; the policy lists a and c.
	px, err := sandbox.StartProxy(filepath.Join(dir, "p"), sandbox.ProxyConfig{Plugin: "prov", Instance: "i1", Allow: []string{a, b}, Policy: networkPolicy{e: k.Policy}})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	t.Setenv(runtime.EnvProxySocket, px.Socket())
	reach := func(addr string) error {
		conn, err := runtime.DialViaProxy(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		fmt.Fprintf(conn, "hi\n")
		l, err := bufio.NewReader(conn).ReadString('\n')
		if l != "echo:hi\n" {
			return fmt.Errorf("tunnel to %s answered %q (%v)", addr, l, err)
		}
		return nil
	}
	refused := func(addr, by string) {
		t.Helper()
		err := reach(addr)
		if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), by) {
			t.Fatalf("%s must be refused by %s: %v", addr, by, err)
		}
	}
	if err := reach(a); err != nil {
		t.Fatalf("declared and whitelisted: %v", err)
	}
	refused(b, "network_whitelist of the project policy")
	refused(c, "manifest's `network` list")

	// Hot reload: the policy now lists b only.
	old := k.Policy.Policy().Hash
	writePolicy(t, home, ws, pol(b))
	deadline := time.Now().Add(10 * time.Second)
	for k.Policy.Policy().Hash == old {
		if time.Now().After(deadline) {
			t.Fatal("policy not reloaded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	refused(a, "network_whitelist of the project policy")
	if err := reach(b); err != nil {
		t.Fatalf("after reload: %v", err)
	}

	// Without the section the manifest alone decides.
	old = k.Policy.Policy().Hash
	writePolicy(t, home, ws, "version: 1\n")
	for k.Policy.Policy().Hash == old {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("policy not reloaded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := reach(a); err != nil {
		t.Fatalf("no network_whitelist: %v", err)
	}
	refused(c, "manifest's `network` list")
}
