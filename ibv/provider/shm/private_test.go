//go:build linux

package shm

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

const outsiderEnv = "GOARMCI_SHM_OUTSIDER"

// TestShmOutsider is the outside process of TestShmFilesPrivate: it tries to open every path
// of GOARMCI_SHM_OUTSIDER (separated by '|') for reading and for writing and prints one line per
// attempt: "denied <path>" or "OPENED <path>".
func TestShmOutsider(t *testing.T) {
	paths := os.Getenv(outsiderEnv)
	if paths == "" {
		t.Skip("the outside process of TestShmFilesPrivate")
	}
	for _, p := range strings.Split(paths, "|") {
		for _, flag := range []int{os.O_RDONLY, os.O_RDWR} {
			f, err := os.OpenFile(p, flag, 0)
			if err != nil {
				fmt.Printf("denied %s\n", p)
				continue
			}
			if flag == os.O_RDWR {
				_, _ = f.WriteAt([]byte("outsider was here"), 0)
			}
			f.Close()
			fmt.Printf("OPENED %s\n", p)
		}
	}
	os.Exit(0)
}

// TestShmFilesPrivate: every file the shm provider creates — the control file in the shm
// directory and the memfd of a shareable buffer — is private to the job's user (mode 0600), and
// a process of another user (nobody) can neither read nor write them, even in a world-writable
// directory like /dev/shm; the job's memory is unchanged after its attempts. The outside-user
// part needs root (to start the child as nobody) and is skipped otherwise.
func TestShmFilesPrivate(t *testing.T) {
	dir, err := os.MkdirTemp("", "goarmci-shm-private-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777|os.ModeSticky)) // as /dev/shm
	ctx, err := Open(Config{Job: "priv", Name: "r0", Dir: dir})
	require.NoError(t, err)
	defer ctx.Close()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, ents)
	var paths []string
	for _, e := range ents {
		fi, err := e.Info()
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), e.Name())
		paths = append(paths, filepath.Join(dir, e.Name()))
	}

	b, err := AllocBuffer(1 << 16)
	require.NoError(t, err)
	defer FreeBuffer(b)
	for i := range b {
		b[i] = byte(i * 7)
	}
	sum := sha256.Sum256(b)
	buffers.mu.Lock()
	buf := buffers.live[addrOf(b)]
	buffers.mu.Unlock()
	require.NotNil(t, buf)
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(buf.fd, &st))
	require.Equal(t, uint32(0o600), st.Mode&0o7777, "the memfd's mode")
	paths = append(paths, fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), buf.fd))

	if os.Geteuid() != 0 {
		t.Skip("the outside-user check starts a process as nobody: needs root")
	}
	// The test binary, where nobody may execute it.
	bin, err := os.MkdirTemp("", "goarmci-shm-bin-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(bin) })
	require.NoError(t, os.Chmod(bin, 0o755))
	exe := filepath.Join(bin, "shm.test")
	src, err := os.Open(os.Args[0])
	require.NoError(t, err)
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	src.Close()
	require.NoError(t, err)
	require.NoError(t, dst.Close())

	cmd := exec.Command(exe, "-test.run=^TestShmOutsider$")
	cmd.Env = append(os.Environ(), outsiderEnv+"="+strings.Join(paths, "|"))
	cmd.Dir = bin
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, p := range paths {
		require.Equal(t, 2, strings.Count(string(out), "denied "+p+"\n"), "%s: %s", p, out)
	}
	require.NotContains(t, string(out), "OPENED")
	require.Equal(t, sum, sha256.Sum256(b), "the job's memory")
	// the control file's header is intact: a peer of the job still maps it
	p, err := openPeer(dir, Addr("priv", "r0"))
	require.NoError(t, err)
	require.True(t, p.alive())
	require.NoError(t, p.unmap())
}
