package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	assert.Contains(t, out, "\n# Version: goarmci (devel)")
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
	assert.True(t, strings.HasPrefix(res.Run.Version, "(devel)"), res.Run.Version)
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
