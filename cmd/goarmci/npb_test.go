package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeNPB writes fake NAS programs that print an NPB report: goarmci's kernel (rank 0 only;
// 1 s over shm, 3 s over tcp), NPB-MPI's cg.A.x under a fake mpirun (2 s with btl self,vader,
// 4 s with self,tcp; np 4 fails its verification). Every run appends its name to log.
func fakeNPB(t *testing.T) (dir, kernel, mpirun, log string) {
	t.Helper()
	dir = t.TempDir()
	log = filepath.Join(dir, "log")
	kernel = filepath.Join(dir, "goarmci-kernel")
	require.NoError(t, os.WriteFile(kernel, []byte(`#!/bin/sh
[ "$GOARMCI_RANK" = 0 ] || exit 0
echo g >> `+log+`
t=1.00; [ "$GOARMCI_TRANSPORT" = tcp ] && t=3.00
printf '\n\n CG Benchmark Completed.\n Class = %s\n Time in seconds = %s\n Ranks = %s\n Verification = SUCCESSFUL\n' "$2" $t "$GOARMCI_SIZE"
`), 0o755))
	npb := filepath.Join(dir, "npb")
	require.NoError(t, os.MkdirAll(npb, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(npb, "cg.A.x"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	mpirun = filepath.Join(dir, "mpirun")
	require.NoError(t, os.WriteFile(mpirun, []byte(`#!/bin/sh
[ "$1" = --version ] && { echo 'mpirun.openmpi (OpenRTE) 4.1.4'; exit 0; }
echo m >> `+log+`
t=2.00; v=SUCCESSFUL
case "$*" in *self,tcp*) t=4.00;; esac
case "$*" in *"-np 4 "*) v=UNSUCCESSFUL;; esac
printf ' CG Benchmark Completed.\n Class           =                        A\n Time in seconds =                     %s\n Total processes =                        2\n Verification    =               %s\n' $t $v
`), 0o755))
	return npb, kernel, mpirun, log
}

func TestBenchNPBTable(t *testing.T) {
	npb, kernel, mpirun, log := fakeNPB(t)
	code, out, errOut := runCLI(t, "bench", "npb", "-npb-dir", npb, "-cg", kernel, "-is", kernel, "-mpirun", mpirun,
		"-kernels", "cg,is", "-classes", "A", "-np", "2,4", "-transport", "shm,tcp", "-runs", "3", "-format", "csv")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "# NPB-MPI: "+filepath.Join(npb, "<kernel>.<class>.x")+" under mpirun (Open MPI 4.1.4)")
	assert.Contains(t, errOut, "no is.A.x (or is.A.2)")
	assert.Contains(t, errOut, "NPB-MPI left out: verification failed")
	cr := csv.NewReader(strings.NewReader(out))
	cr.Comment = '#'
	recs, err := cr.ReadAll()
	require.NoError(t, err, out)
	assert.Equal(t, []string{"kernel", "goarmci (s)", "goarmci min", "goarmci max", "NPB-MPI (s)", "NPB-MPI min", "NPB-MPI max", "goarmci/NPB-MPI"}, recs[0])
	want := [][]string{
		{"CG class A, shm, np 2", "1.000", "1.000", "1.000", "2.000", "2.000", "2.000", "0.500"},
		{"CG class A, shm, np 4", "1.000", "1.000", "1.000", "", "", "", ""}, // NPB's verification failed
		{"CG class A, tcp, np 2", "3.000", "3.000", "3.000", "4.000", "4.000", "4.000", "0.750"},
		{"CG class A, tcp, np 4", "3.000", "3.000", "3.000", "", "", "", ""},
		{"IS class A, shm, np 2", "1.000", "1.000", "1.000", "", "", "", ""}, // no is.A.x
		{"IS class A, shm, np 4", "1.000", "1.000", "1.000", "", "", "", ""},
		{"IS class A, tcp, np 2", "3.000", "3.000", "3.000", "", "", "", ""},
		{"IS class A, tcp, np 4", "3.000", "3.000", "3.000", "", "", "", ""},
	}
	assert.Equal(t, want, recs[1:])
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	// Per row, run k starts with system k mod 2; a failed NPB-MPI is not run again.
	assert.Equal(t, "gmmggm"+"gm"+"gg"+"gmmggm"+"gm"+"gg"+"ggg"+"ggg"+"ggg"+"ggg", strings.ReplaceAll(string(b), "\n", ""))
}

func TestBenchNPBUsage(t *testing.T) {
	npb, kernel, mpirun, _ := fakeNPB(t)
	for _, args := range [][]string{
		{"-cg", kernel, "-kernels", "cg"}, // no -npb-dir
		{"-npb-dir", npb, "-cg", kernel, "-kernels", "bt"},
		{"-npb-dir", npb, "-cg", kernel, "-kernels", "cg", "-classes", "Z"},
		{"-npb-dir", npb, "-cg", kernel, "-kernels", "cg", "-np", "0"},
		{"-npb-dir", npb, "-cg", kernel, "-kernels", "cg", "-transport", "ib"},
		{"-npb-dir", npb, "-cg", kernel, "-kernels", "cg", "-runs", "0"},
		{"-npb-dir", npb, "-cg", kernel, "-kernels", "cg", "-mpirun", mpirun, "-format", "xml"},
	} {
		code, _, errOut := runCLI(t, append([]string{"bench", "npb"}, args...)...)
		assert.Equal(t, 2, code, "%q: %s", args, errOut)
	}
	code, out, _ := runCLI(t, "bench", "npb", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "-npb-dir")
	assert.Contains(t, out, "NPB 3.4 names them cg.A.x")
}

// MG and FT rows take the -mg and -ft kernels and NPB's mg.A.x and ft.A.x.
func TestBenchNPBKernelsMGFT(t *testing.T) {
	npb, kernel, mpirun, _ := fakeNPB(t)
	require.NoError(t, os.WriteFile(filepath.Join(npb, "ft.A.x"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	code, out, errOut := runCLI(t, "bench", "npb", "-npb-dir", npb, "-mg", kernel, "-ft", kernel, "-mpirun", mpirun,
		"-kernels", "mg,ft", "-classes", "A", "-np", "2", "-runs", "1", "-format", "csv")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "no mg.A.x (or mg.A.2)")
	assert.Contains(t, out, "# goarmci: mg = "+kernel+", ft = "+kernel)
	assert.Contains(t, out, "\"MG class A, shm, np 2\",1.000,1.000,1.000,,,,\n")
	assert.Contains(t, out, "\"FT class A, shm, np 2\",1.000,1.000,1.000,2.000,2.000,2.000,0.500\n")
}
