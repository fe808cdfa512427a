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
	p := Peer{Name: "openmpi-allocate", launcher: []string{launcher, "--oversubscribe"}, exe: "/x/mpi_rma", args: []string{"-win", "allocate"}, names: oneSidedNames}
	res, err := p.Run(context.Background(), Options{Name: "fop_latency", Iterations: 7}, 2, "shm")
	require.NoError(t, err)
	assert.Equal(t, "fop_latency", res.Name)
	require.Len(t, res.Rows, 1)
	assert.Equal(t, 0.5, res.Rows[0].Values[0])
	args := strings.Fields(strings.TrimPrefix(res.Title, "# OSU fake "))
	assert.Equal(t, []string{"--oversubscribe", "-np", "2", "/x/mpi_rma", "fop_latency", "-win", "allocate", "-sync", "flush",
		"-min-size", "8", "-max-size", "8", "-iterations", "7", "-window", "64"}, args)

	armci := Peer{Name: "armci", launcher: []string{launcher}, exe: "/x/ga", syncs: []Sync{SyncFlush}}
	_, err = armci.Run(context.Background(), Options{Name: "put_latency", Sync: SyncFence}, 2, "shm")
	assert.ErrorIs(t, err, ErrSync)
	assert.True(t, p.Supports("get_acc_latency"))
	assert.False(t, p.Supports("ga_put"))
}

// With (fake) Open MPI and MPICH compilers and launchers on PATH, FindPeers offers the window
// peers, the MPI_Barrier peers and Open MPI's osc sm and osc rdma as peers of their own, each
// launched with the options that select its component, shared memory only.
func TestFindPeersOscColumns(t *testing.T) {
	bin := t.TempDir()
	// cc: creates the -o file; mpirun --version: names the version.
	cc := "#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then : > \"$2\"; fi; shift; done\n"
	for name, script := range map[string]string{
		"mpicc.openmpi":  cc,
		"mpicc.mpich":    cc,
		"mpirun.openmpi": "#!/bin/sh\necho 'mpirun.openmpi (OpenRTE) 4.1.4'\n",
		"mpirun.mpich":   "#!/bin/sh\necho 'HYDRA build details:'\necho '    Version:                 4.0.2'\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755))
	}
	t.Setenv("PATH", bin)
	peers, _ := FindPeers(context.Background(), t.TempDir())
	byName := map[string]Peer{}
	for _, p := range peers {
		byName[p.Name] = p
	}
	for _, n := range []string{"openmpi-allocate", "openmpi-create", "openmpi-sm", "openmpi-rdma", "openmpi", "mpich-allocate", "mpich-create", "mpich"} {
		require.Contains(t, byName, n)
	}
	assert.NotContains(t, byName, "mpich-sm")
	for _, osc := range []string{"sm", "rdma"} {
		p := byName["openmpi-"+osc]
		assert.Equal(t, []string{filepath.Join(bin, "mpirun.openmpi"), "--oversubscribe", "--mca", "osc", osc, "--mca", "btl", "self,vader"}, p.launcher)
		assert.Equal(t, []string{"-win", "allocate"}, p.args)
		assert.True(t, p.ShmOnly())
		assert.True(t, p.Supports("get_acc_latency"))
		assert.False(t, p.Supports("barrier"))
		assert.Equal(t, "Open MPI 4.1.4, osc "+osc+" (--mca osc "+osc+" --mca btl self,vader), MPI_Win_allocate", p.Describe("tcp"))
		_, err := p.Run(context.Background(), Options{Name: "put_latency"}, 2, "tcp")
		assert.ErrorIs(t, err, ErrShmOnly)
	}
	assert.False(t, byName["openmpi-allocate"].ShmOnly())
	assert.Equal(t, "Open MPI 4.1.4, MPI_Win_allocate, the library's choice of one-sided component; over tcp with --mca btl self,tcp --mca osc pt2pt",
		byName["openmpi-allocate"].Describe("tcp"))
	assert.Equal(t, "MPICH 4.0.2, MPI_Barrier (barrier), MPI_Allreduce (allreduce)", byName["mpich"].Describe("shm"))
	assert.True(t, byName["mpich"].Supports("allreduce"))
	// MPICH's ranks poll without yielding: left out with more ranks than cores
	for _, n := range []string{"mpich", "mpich-allocate", "mpich-create"} {
		assert.True(t, byName[n].BusyPolls(), n)
	}
	assert.False(t, byName["openmpi"].BusyPolls())
	assert.True(t, byName["mpich-allocate"].ShmOnly(), "MPICH keeps shared memory on one host")
	assert.False(t, byName["openmpi"].ShmOnly())
	keep, left := Oversubscribed(peers, 4, 2)
	assert.Len(t, left, 3)
	assert.Len(t, keep, len(peers)-3)
	for _, p := range keep {
		assert.False(t, p.BusyPolls(), p.Name)
	}
	keep, left = Oversubscribed(peers, 2, 2)
	assert.Empty(t, left)
	assert.Len(t, keep, len(peers))
	assert.True(t, byName["openmpi"].Supports("barrier"))
	assert.False(t, byName["openmpi"].Supports("put_latency"))
	assert.False(t, byName["openmpi-allocate"].Supports("barrier"))
}

// The barrier peers run "barrier" on -np ranks with no sizes; the row is keyed by the ranks.
func TestPeerRunBarrier(t *testing.T) {
	dir := t.TempDir()
	launcher := filepath.Join(dir, "fakerun")
	script := "#!/bin/sh\necho \"# OSU fake $*\"\necho '# Ranks         Latency (us)'\necho '4                       0.25'\n"
	require.NoError(t, os.WriteFile(launcher, []byte(script), 0o755))
	p := Peer{Name: "openmpi", launcher: []string{launcher}, exe: "/x/mpi_rma", names: []string{"barrier"}}
	res, err := p.Run(context.Background(), Options{Name: "barrier"}, 4, "shm")
	require.NoError(t, err)
	assert.Equal(t, []string{"-np", "4", "/x/mpi_rma", "barrier", "-sync", "fence", "-window", "64"},
		strings.Fields(strings.TrimPrefix(res.Title, "# OSU fake ")))
	assert.Equal(t, "Ranks", res.KeyLabel)
	require.Len(t, res.Rows, 1)
	assert.Equal(t, 4, res.Rows[0].Size)
	assert.Equal(t, 0.25, res.Rows[0].Values[0])
}
