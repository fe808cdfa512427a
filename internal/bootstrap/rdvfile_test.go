package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// ompiEnv is the environment mpirun gives rank r of size ranks, localSize of them per node
// (Open MPI 4.1's names), plus extra.
func ompiEnv(r, size, localSize int, extra map[string]string) map[string]string {
	m := map[string]string{
		"OMPI_COMM_WORLD_RANK":       strconv.Itoa(r),
		"OMPI_COMM_WORLD_SIZE":       strconv.Itoa(size),
		"OMPI_COMM_WORLD_LOCAL_RANK": strconv.Itoa(r % localSize),
		"OMPI_COMM_WORLD_LOCAL_SIZE": strconv.Itoa(localSize),
		"PMIX_NAMESPACE":             "1234829313",
		"OMPI_MCA_ess_base_jobid":    "1234829313",
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func TestRDVFilePath(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	name := "ompi-" + uid + "-1234829313.addr"
	cases := []struct {
		name             string
		rank, size, locl int
		extra            map[string]string
		want             string // "" = no file
	}{
		{"one node: node-local temporary directory", 1, 4, 4, nil, "/tmp/goarmci-" + uid + "/" + name},
		{"one node, TMPDIR", 0, 4, 4, map[string]string{"TMPDIR": "/scratch/t"}, "/scratch/t/goarmci-" + uid + "/" + name},
		{"one node, relative TMPDIR ignored", 0, 4, 4, map[string]string{"TMPDIR": "t"}, "/tmp/goarmci-" + uid + "/" + name},
		{"several nodes: HOME", 3, 4, 2, map[string]string{"HOME": "/home/u"}, "/home/u/.goarmci/rdv/" + name},
		{"GOARMCI_RDV_DIR, several nodes", 3, 4, 2, map[string]string{"HOME": "/home/u", "GOARMCI_RDV_DIR": "/lustre/j/"},
			"/lustre/j/" + name},
		{"GOARMCI_RDV_DIR, one node", 0, 2, 2, map[string]string{"GOARMCI_RDV_DIR": "/shared"}, "/shared/" + name},
		{"Open MPI 5 namespace", 0, 2, 2, map[string]string{"PMIX_NAMESPACE": "prterun-node01-4242@1", "GOARMCI_RDV_DIR": "/d"},
			"/d/ompi-" + uid + "-prterun-node01-4242_1.addr"},
		{"mpirun's URI is hashed into the name", 0, 2, 2, map[string]string{"GOARMCI_RDV_DIR": "/d",
			"OMPI_MCA_orte_hnp_uri": "1234829312.0;tcp://192.0.2.2:45693"}, "/d/ompi-" + uid + "-1234829313-53d04ef5.addr"}, // fnv-32a
		{"GOARMCI_RDV given: no file", 1, 4, 4, map[string]string{"GOARMCI_RDV": "n1:29500"}, ""},
		{"one rank: no file", 0, 1, 1, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info, err := DetectEnv(envMap(ompiEnv(c.rank, c.size, c.locl, c.extra)))
			require.NoError(t, err)
			assert.Equal(t, LauncherOpenMPI, info.Launcher)
			assert.Equal(t, c.want, info.RDVFile)
			if uri, ok := c.extra["OMPI_MCA_orte_hnp_uri"]; ok {
				// another mpirun, same job id: another file
				other := ompiEnv(c.rank, c.size, c.locl, c.extra)
				other["OMPI_MCA_orte_hnp_uri"] = uri + "0"
				info2, err := DetectEnv(envMap(other))
				require.NoError(t, err)
				assert.NotEqual(t, info.RDVFile, info2.RDVFile)
			}
		})
	}

	// The listen and advertised addresses follow the same one-node test.
	one := Info{Size: 4, LocalSize: 4}
	bound := &net.TCPAddr{IP: net.IPv4zero, Port: 4242}
	assert.Equal(t, "127.0.0.1:0", rdvFileListen(one))
	assert.Equal(t, "127.0.0.1:4242", rdvFileAdvertise(one, bound))
	for _, several := range []Info{{Size: 4, LocalSize: 2}, {Size: 4, LocalSize: -1}} {
		assert.Equal(t, ":0", rdvFileListen(several))
		assert.Equal(t, net.JoinHostPort(advertiseHost(), "4242"), rdvFileAdvertise(several, bound))
	}
}

func TestRDVFilePathErrors(t *testing.T) {
	cases := []struct {
		name, mention string
		env           map[string]string
	}{
		{"relative GOARMCI_RDV_DIR", "GOARMCI_RDV_DIR", ompiEnv(0, 2, 2, map[string]string{"GOARMCI_RDV_DIR": "rdv"})},
		{"several nodes without HOME", "GOARMCI_RDV_DIR", ompiEnv(0, 4, 2, nil)},
		{"no job id", "PMIX_NAMESPACE", ompiEnv(0, 2, 2, map[string]string{"PMIX_NAMESPACE": "", "OMPI_MCA_ess_base_jobid": ""})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DetectEnv(envMap(c.env))
			require.ErrorIs(t, err, ErrBadEnv)
			assert.Contains(t, err.Error(), c.mention)
		})
	}
}

// ompiInfos detects size ranks of an Open MPI job from fake environments whose rendezvous
// files go to dir.
func ompiInfos(t *testing.T, size, localSize int, dir string) []Info {
	t.Helper()
	var infos []Info
	for r := range size {
		info, err := DetectEnv(envMap(ompiEnv(r, size, localSize, map[string]string{"GOARMCI_RDV_DIR": dir})))
		require.NoError(t, err)
		require.Equal(t, filepath.Join(dir, "ompi-"+strconv.Itoa(os.Getuid())+"-1234829313.addr"), info.RDVFile)
		infos = append(infos, info)
	}
	return infos
}

// requireEmptyDir checks that the rendezvous directory holds nothing: neither the file nor a
// temporary one.
func requireEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	require.Empty(t, names, "files left in %s", dir)
}

// TestOpenMPIFileRendezvous: ranks of an mpirun job without GOARMCI_RDV, as goroutines with
// Open MPI's variables, meet through the file; it is gone once they have joined. On one node rank
// 0 listens on loopback, on several on every interface (advertising its first address).
func TestOpenMPIFileRendezvous(t *testing.T) {
	for _, localSize := range []int{4, 2} {
		t.Run(fmt.Sprintf("local size %d of 4", localSize), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rdv") // created by rank 0
			connectAll(t, ompiInfos(t, 4, localSize, dir))
			requireEmptyDir(t, dir)
		})
	}
}

// TestOpenMPIStaleFile: a file of the same name left by an earlier job, pointing at a closed
// port, does not stop the job: the ranks re-read the file after a failed dial until rank 0's
// address is there.
func TestOpenMPIStaleFile(t *testing.T) {
	dir := t.TempDir()
	infos := ompiInfos(t, 3, 3, dir)
	require.NoError(t, writeRDVFile(infos[0].RDVFile, net.JoinHostPort("127.0.0.1", freePort(t))))
	st, err := os.Stat(infos[0].RDVFile)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), st.Mode().Perm())
	connectAll(t, infos)
	requireEmptyDir(t, dir)
}

// TestOpenMPIFileNeverWritten: without rank 0 the others' wait ends with the start-up deadline,
// and the error says which file, which knob, and what to do.
func TestOpenMPIFileNeverWritten(t *testing.T) {
	dir := t.TempDir()
	info := ompiInfos(t, 2, 1, dir)[1]
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Connect(ctx, info)
	require.ErrorIs(t, err, ErrStartupTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	for _, want := range []string{info.RDVFile, "GOARMCI_RDV_DIR", "GOARMCI_RDV=host:port", "never wrote", "launcher openmpi"} {
		assert.Contains(t, err.Error(), want)
	}
}

// TestOpenMPIFileRemovedOnFailure: rank 0 whose job never assembles removes its file when its
// Connect fails.
func TestOpenMPIFileRemovedOnFailure(t *testing.T) {
	dir := t.TempDir()
	info := ompiInfos(t, 2, 2, dir)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := Connect(ctx, info)
	require.ErrorIs(t, err, ErrStartupTimeout)
	requireEmptyDir(t, dir)
}

// TestOpenMPIForeignFile: a file that does not hold host:port, or that belongs to another user,
// is an error at once (ErrProtocol), not a wait for the deadline.
func TestOpenMPIForeignFile(t *testing.T) {
	dir := t.TempDir()
	info := ompiInfos(t, 2, 2, dir)[1]
	require.NoError(t, os.WriteFile(info.RDVFile, []byte("<html>\n"), 0o600))
	_, err := Connect(context.Background(), info) // no deadline: must not wait
	require.ErrorIs(t, err, ErrProtocol)
	assert.Contains(t, err.Error(), info.RDVFile)

	if os.Getuid() == 0 {
		require.NoError(t, writeRDVFile(info.RDVFile, "127.0.0.1:1"))
		require.NoError(t, os.Chown(info.RDVFile, 4242, 4242))
		_, err = Connect(context.Background(), info)
		require.ErrorIs(t, err, ErrProtocol)
		assert.Contains(t, err.Error(), "belongs to uid 4242")
	}
}

// TestRDVPortInUse: rank 0 that must host the rendezvous on a fixed port held by another
// process fails at once with ErrAddrInUse naming the port and the way out, under GOARMCI_RDV and
// at Slurm's derived port.
func TestRDVPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	rdv := net.JoinHostPort("127.0.0.1", port)
	_, err = Connect(context.Background(), Info{Launcher: LauncherOpenMPI, Rank: 0, Size: 2, RDV: rdv})
	require.ErrorIs(t, err, ErrAddrInUse)
	for _, want := range []string{"rendezvous port :" + port + " is already in use (another job?)", "GOARMCI_RDV=" + rdv,
		"leave GOARMCI_RDV unset"} {
		assert.Contains(t, err.Error(), want)
	}

	// A Slurm job step whose derived port is one this test holds.
	var job string
	var held net.Listener
	for i := 0; i < 1000 && held == nil; i++ {
		job = fmt.Sprintf("%d.%d", os.Getpid(), i)
		held, _ = net.Listen("tcp", ":"+strconv.Itoa(slurmPort(job)))
	}
	if held == nil {
		t.Skip("no derived port free to hold")
	}
	defer held.Close()
	_, err = Connect(context.Background(), Info{Launcher: LauncherSlurm, Rank: 0, Size: 2, JobID: job, Nodelist: "localhost"})
	require.ErrorIs(t, err, ErrAddrInUse)
	assert.Contains(t, err.Error(), "already in use")
	assert.Contains(t, err.Error(), "GOARMCI_RDV=host:port")
}

// TestNotARendezvous: a rank dialing a port owned by another program gets a clear error, not a
// start-up timeout: one that answers with other bytes (ErrProtocol), one that reads and hangs up.
func TestNotARendezvous(t *testing.T) {
	for _, answer := range []string{"HTTP/1.1 400 Bad Request\r\n\r\n", ""} {
		t.Run(fmt.Sprintf("answer %q", answer), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			var wg sync.WaitGroup
			defer wg.Wait()
			defer ln.Close()
			wg.Add(1)
			go func() { // owned by the test: ends with ln
				defer wg.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					var hello [headerLen]byte
					_, _ = io.ReadFull(c, hello[:])
					_, _ = c.Write([]byte(answer))
					c.Close()
				}
			}()
			_, err = Connect(context.Background(), Info{Launcher: LauncherOpenMPI, Rank: 1, Size: 2, RDV: ln.Addr().String()})
			require.Error(t, err)
			assert.False(t, errors.Is(err, ErrStartupTimeout), "%v", err)
			if answer != "" {
				require.ErrorIs(t, err, ErrProtocol)
				assert.Contains(t, err.Error(), "is not a goarmci rendezvous")
			} else {
				assert.Contains(t, err.Error(), "closed the connection without a welcome")
			}
		})
	}
}

// TestOpenMPIProcessEnv: the same through Detect and the process environment (t.Setenv), as
// a rank started by mpirun sees it.
func TestOpenMPIProcessEnv(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"GOARMCI_RANK", "GOARMCI_SIZE", "GOARMCI_RDV", "OMPI_MCA_orte_hnp_uri"} {
		t.Setenv(k, "")
	}
	for k, v := range ompiEnv(0, 2, 2, map[string]string{"GOARMCI_RDV_DIR": dir}) {
		t.Setenv(k, v)
	}
	info, err := Detect()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "ompi-"+strconv.Itoa(os.Getuid())+"-1234829313.addr"), info.RDVFile)
	var g errgroup.Group
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for r := range 2 {
		i := info
		i.Rank = r
		g.Go(func() error {
			c, err := Connect(ctx, i)
			if err != nil {
				return err
			}
			return errors.Join(c.Barrier(ctx), c.Close())
		})
	}
	require.NoError(t, g.Wait())
	requireEmptyDir(t, dir)
}
