package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `bench barrier -sim`: a latency table and a speed-up table, one row per job size, and with
// -out their CSV files (the PNGs need the plotting command, which tests do not build).
func TestBenchBarrierSim(t *testing.T) {
	useTestBubble(t)
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "bench", "barrier", "-sim", "-np", "2,3", "-iters", "1", "-warmup", "1", "-format", "csv",
		"-alg", "rgm,message", "-out", dir)
	if code != 0 && assert.Contains(t, errOut, "plot") {
		t.Logf("no plotting command here: %s", errOut)
	} else {
		require.Equal(t, 0, code, errOut)
	}
	assert.Contains(t, out, "ranks,RGM (us),p2p central (us)")
	assert.Contains(t, out, "ranks,RGM")
	for _, f := range []string{"barrier.csv", "barrier-speedup.csv"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		assert.Contains(t, string(b), "\n3,")
	}
}

// `bench apm -sim`, `bench qp-setup -sim`, `bench memory -sim` and `bench aqps -sim` on small
// sizes; bad options exit with 2.
func TestBenchScaleSims(t *testing.T) {
	useTestBubble(t)
	code, out, errOut := runCLI(t, "bench", "apm", "-sim", "-qps", "2,4", "-iters", "2")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^4 +[0-9.]+ +[0-9.]+`, out)
	code, out, errOut = runCLI(t, "bench", "qp-setup", "-sim", "-np", "2,5")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^5 +4\.00 +[0-9.]+ +4\.00 `, out, "5 ranks connected on demand by barriers: every peer")
	code, out, errOut = runCLI(t, "bench", "memory", "-sim", "-ranks", "4,8", "-full", "4", "-maxrc", "2", "-rma", "4", "-format", "csv")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^4,(-?[0-9.]+,){9}1\.0+$`, out, "4 ranks built whole")
	assert.Regexp(t, `(?m)^8,(-?[0-9.]+,){9}0\.0+$`, out, "8 ranks extrapolated")
	assert.Regexp(t, `(?m)^4,(-?[0-9.]+,){5}2\.0+,3\.0+$`, out, "per peer: 2 RC connections and 3 DC records per rank")
	assert.Regexp(t, `(?m)^ranks,rc median \(KiB\),.*,adaptive RC open max\n4,`, out, "the rma jobs of 4 ranks")
	code, out, errOut = runCLI(t, "bench", "aqps", "-sim", "-ranks", "4", "-messages", "3", "-modes", "rc", "-format", "csv")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ranks,rc (us)")
	assert.Regexp(t, `(?m)^4,[0-9.]+$`, out, "one row per pattern")
	for _, args := range [][]string{{"barrier", "-np", "1"}, {"barrier", "-alg", "ring"}, {"apm", "-qps", "0"}, {"qp-setup", "-np", "x"},
		{"memory", "-ranks", "1"}, {"memory", "-maxrc", "-1"}, {"memory", "-full", "5000"}, {"memory", "-rma", "300"},
		{"aqps", "-ranks", "1"}, {"aqps", "-ranks", "4,8"}, {"aqps", "-modes", "ud"}} {
		code, _, errOut := runCLI(t, append([]string{"bench", "-sim"}, args...)...)
		assert.Equal(t, 2, code, "%v: %s", args, errOut)
	}
}
