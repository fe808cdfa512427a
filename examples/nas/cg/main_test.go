package main

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
)

func TestSerialClassSReport(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-serial", "-class", "S"}, &out, &errb)
	assert.Equal(t, 0, code, errb.String())
	s := out.String()
	for _, l := range []string{" Class = S\n", " Ranks = 1\n", " Verification = SUCCESSFUL\n",
		" Time in seconds = ", " Mop/s total = ", " Zeta = 8.5971775078648E+00\n"} {
		assert.Contains(t, s, l)
	}
}

func TestBadClass(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-class", "Q"}, &out, &errb))
	assert.Contains(t, errb.String(), "unknown benchmark class")
}

// Without a launcher the program runs as a singleton job on the Global Arrays path.
func TestSingletonClassS(t *testing.T) {
	if raceEnabled {
		t.Skip("full class S under the race detector; TestUnsuccessfulExitStatus covers the path")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-class", "S"}, &out, &errb)
	assert.Equal(t, 0, code, errb.String())
	s := out.String()
	for _, l := range []string{" Class = S\n", " Ranks = 1\n", " Verification = SUCCESSFUL\n",
		" Zeta = 8.5971775078648E+00\n", "Global Arrays"} {
		assert.Contains(t, s, l)
	}
}

// Too few iterations: zeta misses the official value, the report says so and the status is 1.
func TestUnsuccessfulExitStatus(t *testing.T) {
	for _, args := range [][]string{{"-serial", "-niter", "2"}, {"-niter", "2"}} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		assert.Equal(t, 1, code, "%v: %s", args, errb.String())
		assert.Contains(t, out.String(), " Verification = UNSUCCESSFUL\n", args)
	}
	var out, errb bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-niter", "-1"}, &out, &errb))
}

// -sim 16: the same program on 16 ranks of this process over the simulated network ibv/fabric,
// under testing/synctest (virtual time); the report is the real job's.
func TestSimClassS(t *testing.T) {
	if raceEnabled {
		t.Skip("full class S under the race detector; cgga's TestRunClassSFabric covers the fabric path")
	}
	synctest.Test(t, func(t *testing.T) {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"-class", "S", "-sim", "16"}, &out, &errb)
		assert.Equal(t, 0, code, errb.String())
		s := out.String()
		for _, l := range []string{" Class = S\n", " Ranks = 16\n", " Verification = SUCCESSFUL\n",
			" Zeta = 8.5971775078648E+00\n", "simulated fabric"} {
			assert.Contains(t, s, l)
		}
	})
}

func TestSimBadRanks(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-sim", "-1"}, &out, &errb))
	assert.Contains(t, errb.String(), "-sim -1")
}
