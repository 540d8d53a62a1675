package sandbox

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"time"
)

// The non-root identity plugins run as inside L2.
const (
	SandboxUID = 65532
	SandboxGID = 65532
)

// GuestIdentity is the uid and gid a plugin runs as inside an L2 container:
// the invoking user's own uid and gid when the kernel is not root, so that
// every project the user can read is readable in the sandbox (a 0700
// project directory, 0600 files) and everything the plugin writes to /out
// is the user's to normalise and delete; SandboxUID/SandboxGID when the
// kernel runs as root (never uid 0 in a sandbox). Either way the plugin
// sees only what is mounted, with all capabilities dropped and no new
// privileges. go-plugin's socket directory is group-writable for gid.
// Whatever is mounted into the container must be readable by this
// identity; the session workspace uses it to decide which project files it
// can share with the sandbox by hard link and which it must copy.
func GuestIdentity() (uid, gid int) {
	return guestIdentity(os.Getuid(), os.Getgid())
}

func guestIdentity(uid, gid int) (int, int) {
	if uid == 0 {
		return SandboxUID, SandboxGID
	}
	return uid, gid
}

// Paths inside an L2 container.
const (
	GuestWorkspace = "/workspace"
	GuestOut       = "/out"
	GuestPluginDir = "/plugin"
	GuestSocketDir = "/run/fluffy/plugin"
	GuestProxyDir  = "/run/fluffy/proxy"
	GuestTmp       = "/tmp"
)

// BaseImageTar returns the rootfs of fluffy's L2 base image: empty
// directories for the mount points and an /etc/passwd with the non-root
// user. Plugins are static binaries, so nothing else is needed. The tar is
// deterministic, so its hash names the image.
func BaseImageTar() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	dirs := []string{"etc", "tmp", "out", "workspace", "plugin", "proc", "dev", "sys", "run", "run/fluffy", "run/fluffy/plugin", "run/fluffy/proxy"}
	for _, d := range dirs {
		mode := int64(0o755)
		// A tmpfs mounted on an image directory takes that directory's
		// mode (runc), so the ones the sandbox user writes are 1777.
		if d == "tmp" || d == "run/fluffy/plugin" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: mtime}); err != nil {
			return nil, fmt.Errorf("base image tar: %w", err)
		}
	}
	files := map[string]string{
		"etc/passwd": fmt.Sprintf("root:x:0:0:root:/nonexistent:/sbin/nologin\nfluffy:x:%d:%d:fluffy plugin:/nonexistent:/sbin/nologin\n", SandboxUID, SandboxGID),
		"etc/group":  fmt.Sprintf("root:x:0:\nfluffy:x:%d:\n", SandboxGID),
	}
	for _, name := range []string{"etc/group", "etc/passwd"} {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: mtime}); err != nil {
			return nil, fmt.Errorf("base image tar: %w", err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return nil, fmt.Errorf("base image tar: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("base image tar: %w", err)
	}
	return buf.Bytes(), nil
}

// BaseImageRef names the base image by the hash of its content, so a changed
// rootfs is a new image and an unchanged one is imported exactly once.
func BaseImageRef(tarball []byte) string {
	sum := sha256.Sum256(tarball)
	return "fluffy-l2-base:" + hex.EncodeToString(sum[:])[:12]
}
