package main

import (
	"os/exec"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// useTestBubble makes `bench hotspot -sim` run its jobs in synctest bubbles of t (a test binary
// cannot start testing.Main again).
func useTestBubble(t *testing.T) {
	simBubble = func(f func()) { synctest.Test(t, func(*testing.T) { f() }) }
	t.Cleanup(func() { simBubble = nil })
}

// A small simulated DRC and Alltoall: one row per job size, one column per configuration.
func TestBenchHotspotSim(t *testing.T) {
	useTestBubble(t)
	common := []string{"bench", "hotspot", "-sim", "-np", "4,6", "-hosts-per-leaf", "2", "-spines", "2", "-d", "2",
		"-runs", "1/binding,2/hsam", "-size", "16k", "-iters", "1", "-window", "2"}
	code, out, errOut := runCLI(t, common...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "# goarmci hot-spot simulation: DRC, seq placement")
	assert.Regexp(t, `(?m)^# Ranks +1 path +hsam 2 paths$`, out)
	assert.Regexp(t, `(?m)^4 +[0-9.]+ +[0-9.]+$`, out)
	assert.Regexp(t, `(?m)^6 +[0-9.]+ +[0-9.]+$`, out)

	code, out, errOut = runCLI(t, append(common, "-pattern", "alltoall", "-placement", "random", "-format", "csv")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ALLTOALL")
	assert.Contains(t, out, "ranks,1 path,hsam 2 paths")
}

func TestBenchHotspotSimUsage(t *testing.T) {
	useTestBubble(t)
	for _, args := range [][]string{
		{"-pattern", "ring"}, {"-placement", "rows"}, {"-np", "x"}, {"-runs", "4"}, {"-format", "xml"}, {"-hot", "0.5"},
	} {
		code, _, errOut := runCLI(t, append([]string{"bench", "hotspot", "-sim", "-np", "4"}, args...)...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
	}
}

// The command itself runs the simulation under testing.Main of its own process: the table on
// standard output, nothing of the testing package's, exit code 0 (2 for bad options).
func TestBenchHotspotSimProcess(t *testing.T) {
	args := []string{"bench", "hotspot", "-sim", "-np", "4", "-hosts-per-leaf", "2", "-spines", "2", "-d", "2",
		"-runs", "2/adaptive", "-size", "16k", "-iters", "1", "-window", "2"}
	out, err := exec.Command(goarmciExe, args...).Output()
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^4 +[0-9.]+$`, string(out))
	assert.NotContains(t, string(out), "PASS")
	err = exec.Command(goarmciExe, append(args, "-pattern", "ring")...).Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.ExitCode())
}
