//go:build linux

package testutil

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// SmallTmpfs mounts a tmpfs of size bytes on a fresh directory and unmounts it when the test
// ends (lazily if something still holds it). It skips the test when it cannot mount: not root,
// or no permission (a container without CAP_SYS_ADMIN).
func SmallTmpfs(t testing.TB, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
	return dir
}

// DirNames lists the names in dir (nil when it is empty).
func DirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
