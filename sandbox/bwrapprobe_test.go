package sandbox

import "testing"

// TestMountRaced: a probe that lost a race with the engine's mounts is
// tried again; a refusal of bubblewrap's namespaces is not.
func TestMountRaced(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  string
		want bool
	}{
		{"overlay remounted away", `bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "/newroot/var/lib/docker/fuse-overlayfs/596b-init/merged": Invalid argument`, true},
		{"mount gone", `bwrap: Can't bind mount /oldroot/var/lib/docker/overlay2/x/merged on /newroot/var/lib/docker/overlay2/x/merged: No such file or directory`, true},
		{"no user namespaces", `bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.`, false},
		{"setting up uid map", `bwrap: setting up uid map: Permission denied`, false},
		{"bind refused", `bwrap: Can't bind mount /oldroot/ on /newroot/: Permission denied`, false},
	} {
		if got := mountRaced(tc.out); got != tc.want {
			t.Errorf("%s: mountRaced = %v, want %v", tc.name, got, tc.want)
		}
	}
}
