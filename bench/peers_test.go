package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Without MPI compilers on PATH there are no peers, one note per missing MPI, and the sources
// are still written out (nothing is compiled by go test).
func TestFindPeersWithoutCompilers(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	peers, notes := FindPeers(context.Background(), dir)
	assert.Empty(t, peers)
	require.Len(t, notes, 2)
	assert.Contains(t, notes[0], "mpicc.openmpi")
	assert.Contains(t, notes[1], "mpicc.mpich")
	for _, f := range []string{"mpi_rma.c", "ga_bench.c", "common.h", "Makefile"} {
		b, err := os.ReadFile(filepath.Join(dir, "src", f))
		require.NoError(t, err, f)
		assert.NotEmpty(t, b)
	}
}

// A peer's command line carries the benchmark, its sync and the counts, and its OSU text is
// parsed; a peer that cannot express the sync is refused before it runs.
func TestPeerRunCommandLine(t *testing.T) {
	dir := t.TempDir()
	launcher := filepath.Join(dir, "fakerun")
	// The fake launcher prints its arguments as a header line, then an OSU table.
	script := "#!/bin/sh\necho \"# OSU fake $*\"\necho '# Size          Latency (us)'\necho '8                       0.50'\n"
	require.NoError(t, os.WriteFile(launcher, []byte(script), 0o755))
	p := Peer{Name: "openmpi-allocate", Launcher: []string{launcher, "--oversubscribe"}, Exe: "/x/mpi_rma", Args: []string{"-win", "allocate"}, names: oneSidedNames}
	res, err := p.Run(context.Background(), Options{Name: "fop_latency", Iterations: 7}, 2, "shm")
	require.NoError(t, err)
	assert.Equal(t, "fop_latency", res.Name)
	require.Len(t, res.Rows, 1)
	assert.Equal(t, 0.5, res.Rows[0].Values[0])
	args := strings.Fields(strings.TrimPrefix(res.Title, "# OSU fake "))
	assert.Equal(t, []string{"--oversubscribe", "-np", "2", "/x/mpi_rma", "fop_latency", "-win", "allocate", "-sync", "flush",
		"-min-size", "8", "-max-size", "8", "-iterations", "7", "-window", "64"}, args)

	armci := Peer{Name: "armci", Launcher: []string{launcher}, Exe: "/x/ga", syncs: []Sync{SyncFlush}}
	_, err = armci.Run(context.Background(), Options{Name: "put_latency", Sync: SyncFence}, 2, "shm")
	assert.ErrorIs(t, err, ErrSync)
	assert.True(t, p.Supports("get_acc_latency"))
	assert.False(t, p.Supports("ga_put"))
}
