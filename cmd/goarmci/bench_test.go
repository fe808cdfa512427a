package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/bench"
	"github.com/goarmci/goarmci/internal/testutil"
)

// benchCLI runs the built goarmci binary (bench re-launches itself, so it cannot run inside the
// test binary).
func benchCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(goarmciExe, append([]string{"bench"}, args...)...)
	cmd.Env = testutil.CleanEnv()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), e.String()
	}
	require.NoError(t, err)
	return 0, o.String(), e.String()
}

// cleanEnv drops launcher variables, so bench launches its own ranks even under a launcher.
func TestBenchPutBwParsesAsOSUText(t *testing.T) {
	code, out, errOut := benchCLI(t, "put_bw", "-iterations", "10", "-max-size", "4096")
	require.Equal(t, 0, code, errOut)
	res, err := bench.ParseOSU(strings.NewReader(out))
	require.NoError(t, err, out)
	assert.Equal(t, "# OSU MPI_Put Bandwidth Test (goarmci)", res.Title)
	require.NotNil(t, res.Run, "the Version and Machine lines")
	assert.Equal(t, runtime.Version(), res.Run.GoVersion)
	assert.Equal(t, "Size", res.KeyLabel)
	assert.Equal(t, []string{"Bandwidth (MB/s)"}, res.Columns)
	require.Len(t, res.Rows, 13) // 1 B .. 4 KiB
	for i, row := range res.Rows {
		assert.Equal(t, 1<<i, row.Size)
		assert.Greater(t, row.Values[0], 0.0)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Regexp(t, `^# Size +Bandwidth \(MB/s\)$`, lines[len(lines)-14])
	assert.Regexp(t, `^4096 +[0-9]+\.[0-9]{2}$`, lines[len(lines)-1], "two decimals")
	assert.NotContains(t, errOut, "warn")
}

func TestBenchFormatsAndPlot(t *testing.T) {
	code, out, errOut := benchCLI(t, "get_latency", "--iterations=5", "-max-size", "8", "-format", "csv", "-sync", "lock")
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(out, "# OSU MPI_Get Latency Test (goarmci)\n"), out)
	assert.Contains(t, out, "\n# Transport: shm, 2 ranks\n")
	assert.Regexp(t, "\n# Version: goarmci "+moduleVersion+"[ ,]", out)
	assert.Contains(t, out, ", "+runtime.Version()+"\n")
	assert.Contains(t, out, "\n# Machine: ")
	cr := csv.NewReader(strings.NewReader(out))
	cr.Comment = '#'
	recs, err := cr.ReadAll()
	require.NoError(t, err)
	require.Len(t, recs, 5)
	assert.Equal(t, []string{"size", "Latency (us)"}, recs[0])
	assert.Equal(t, "8", recs[4][0])

	png := filepath.Join(t.TempDir(), "fop.png")
	code, out, errOut = benchCLI(t, "fop_latency", "-iterations", "5", "-format", "json", "-plot", png, "-transport", "tcp")
	require.Equal(t, 0, code, errOut)
	var res bench.Result
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, "fop_latency", res.Name)
	assert.Equal(t, "tcp", res.Transport)
	assert.Equal(t, 2, res.Ranks)
	require.NotNil(t, res.Run)
	assert.Equal(t, runtime.Version(), res.Run.GoVersion)
	assert.Equal(t, runtime.NumCPU(), res.Run.CPUs)
	assert.Regexp(t, "^"+moduleVersion, res.Run.Version)
	host, _ := os.Hostname()
	assert.Equal(t, host, res.Run.Host)
	require.Len(t, res.Rows, 1)
	assert.Equal(t, 8, res.Rows[0].Size)
	b, err := os.ReadFile(png)
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG", string(b[:4]))
}

func TestBenchBarrierSweepsGroupSizes(t *testing.T) {
	code, out, errOut := benchCLI(t, "barrier", "-np", "3", "-iterations", "20", "-alg", "dissemination,pairwise")
	require.Equal(t, 0, code, errOut)
	res, err := bench.ParseOSU(strings.NewReader(out))
	require.NoError(t, err, out)
	assert.Equal(t, "Ranks", res.KeyLabel)
	assert.Equal(t, []string{"dissemination (us)", "pairwise (us)"}, res.Columns)
	require.Len(t, res.Rows, 2)
	assert.Equal(t, []int{2, 3}, []int{res.Rows[0].Size, res.Rows[1].Size})
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nope"},
		{"put_bw", "-format", "xml"},
		{"put_bw", "-transport", "ib"},
		{"put_bibw", "-sync", "lock"},
		{},
	} {
		code, _, errOut := runCLI(t, append([]string{"bench"}, args...)...)
		assert.Equal(t, 2, code, "%q: %s", args, errOut)
		assert.NotEmpty(t, errOut)
	}
	code, out, _ := runCLI(t, "bench", "list")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "put_latency")
	assert.Contains(t, out, "ga_read_inc")
}

func TestBenchHelpListsEveryBenchmark(t *testing.T) {
	for _, h := range []string{"--help", "-h"} {
		code, out, errOut := runCLI(t, "bench", h)
		require.Equal(t, 0, code, errOut)
		names := append(append(bench.Names(), "ga"), bench.ScenarioNames()...)
		for _, n := range names {
			assert.Regexp(t, `(?m)^  `+n+` +\S`, out, "%s lists %s", h, n)
		}
		assert.Contains(t, out, "-plot")
		assert.Contains(t, out, "-np")
	}
	// goarmci help bench shows the list too.
	code, out, _ := runCLI(t, "help", "bench")
	require.Equal(t, 0, code)
	for _, n := range bench.Names() {
		assert.Contains(t, out, "  "+n+" ")
	}
}

// fakeMPI writes an mpicc.openmpi that only creates its -o file and an mpirun.openmpi that
// names its version and prints the OSU table body given for every run (its arguments as a
// header line), and returns their directory (the whole PATH of the command under test).
func fakeMPI(t *testing.T, table string) string {
	t.Helper()
	bin := t.TempDir()
	cc := "#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then : > \"$2\"; fi; shift; done\n"
	run := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'mpirun.openmpi (OpenRTE) 4.1.4'; exit 0; fi\n" +
		"echo '# OSU fake MPI'\necho \"# Args: $*\"\nprintf '" + table + "'\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "mpicc.openmpi"), []byte(cc), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "mpirun.openmpi"), []byte(run), 0o755))
	return bin
}

func benchCLIEnv(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(goarmciExe, append([]string{"bench"}, args...)...)
	cmd.Env = append(testutil.CleanEnv(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), o.String(), e.String()
	}
	require.NoError(t, err)
	return 0, o.String(), e.String()
}

// compare barrier puts goarmci's Barrier beside the MPI_Barrier peer, with each
// system's median, min and max and the ratio, and says what each column ran.
func TestBenchCompareBarrierBesideMPIBarrier(t *testing.T) {
	bin := fakeMPI(t, `# Ranks         Latency (us)\n2                       0.50\n`)
	code, out, errOut := benchCLIEnv(t, []string{"PATH=" + bin}, "compare", "barrier", "-runs", "2", "-iterations", "20",
		"-peer-dir", t.TempDir(), "-peers", "openmpi", "-format", "csv")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "mpicc.mpich") // the missing MPICH is a note
	assert.Contains(t, out, "\n# goarmci: rma.Barrier (its algorithm for the job: GOARMCI_BARRIER=auto)\n")
	assert.Contains(t, out, "\n# openmpi: Open MPI 4.1.4, MPI_Barrier (barrier), MPI_Allreduce (allreduce)\n")
	assert.Contains(t, out, "\n# Transport: shm, 2 ranks\n")
	cr := csv.NewReader(strings.NewReader(out))
	cr.Comment = '#'
	recs, err := cr.ReadAll()
	require.NoError(t, err, out)
	require.Len(t, recs, 2, out)
	assert.Equal(t, []string{"ranks", "goarmci", "goarmci min", "goarmci max", "openmpi", "openmpi min", "openmpi max", "goarmci/openmpi"}, recs[0])
	assert.Equal(t, "2", recs[1][0])
	assert.Equal(t, []string{"0.500", "0.500", "0.500"}, recs[1][4:7])
	g, err := strconv.ParseFloat(recs[1][1], 64)
	require.NoError(t, err)
	lo, _ := strconv.ParseFloat(recs[1][2], 64)
	hi, _ := strconv.ParseFloat(recs[1][3], 64)
	assert.True(t, lo <= g && g <= hi && lo > 0, "%v <= %v <= %v", lo, g, hi)
	r, _ := strconv.ParseFloat(recs[1][7], 64)
	assert.InDelta(t, g/0.5, r, 0.01)
}

// Over tcp the shared-memory-only osc peers are left out with a note; the others run with the
// network options, and the header names the osc of each column.
func TestBenchCompareOscPeers(t *testing.T) {
	bin := fakeMPI(t, `# Size          Latency (us)\n8                       0.25\n`)
	args := []string{"compare", "put_latency", "-runs", "1", "-iterations", "20", "-min-size", "8", "-max-size", "8",
		"-peer-dir", t.TempDir(), "-peers", "openmpi-allocate,openmpi-sm,openmpi-rdma", "-api", "window", "-sync", "lock"}
	code, out, errOut := benchCLIEnv(t, []string{"PATH=" + bin}, args...)
	require.Equal(t, 0, code, errOut)
	res, err := bench.ParseOSU(strings.NewReader(out))
	require.NoError(t, err, out)
	for _, p := range []string{"openmpi-allocate", "openmpi-sm", "openmpi-rdma"} {
		assert.Contains(t, res.Columns, p)
		assert.Contains(t, res.Columns, "goarmci/"+p)
	}
	assert.Contains(t, res.Header, "openmpi-sm: Open MPI 4.1.4, osc sm (--mca osc sm --mca btl self,vader), MPI_Win_allocate")
	assert.Contains(t, res.Header, "openmpi-rdma: Open MPI 4.1.4, osc rdma (--mca osc rdma --mca btl self,vader), MPI_Win_allocate")
	assert.Contains(t, res.Header, "goarmci: MPI-3 windows (-api window, package window), MPI_Win_allocate")
	assert.Contains(t, res.Header, "Transport: shm, 2 ranks, sync lock")

	code, out, errOut = benchCLIEnv(t, []string{"PATH=" + bin}, append(args, "-transport", "tcp")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "openmpi-sm left out: shared memory only")
	assert.Contains(t, errOut, "openmpi-rdma left out: shared memory only")
	res, err = bench.ParseOSU(strings.NewReader(out))
	require.NoError(t, err, out)
	assert.Equal(t, []string{"goarmci", "goarmci min", "goarmci max", "openmpi-allocate", "openmpi-allocate min", "openmpi-allocate max", "goarmci/openmpi-allocate"}, res.Columns)
	assert.Contains(t, res.Header, "openmpi-allocate: Open MPI 4.1.4, MPI_Win_allocate, the library's choice of one-sided component; over tcp with --mca btl self,tcp --mca osc pt2pt")
}
