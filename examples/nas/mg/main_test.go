package main

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
)

const normS = " L2 Norm = 5.30770700573"

func TestSerialClassSReport(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-serial", "-class", "S"}, &out, &errb)
	assert.Equal(t, 0, code, errb.String())
	s := out.String()
	for _, l := range []string{" MG Benchmark Completed.\n", " Class = S\n", " Size = 32x32x32\n",
		" Iterations = 4\n", " Ranks = 1\n", " Verification = SUCCESSFUL\n", " Time in seconds = ",
		" Mop/s total = ", normS, "  iter    4\n"} {
		assert.Contains(t, s, l)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-class", "Q"}, {"-niter", "-1"}, {"-replicate", "0"}, {"-replicate", "-2"}} {
		var out, errb bytes.Buffer
		assert.Equal(t, 2, run(context.Background(), args, &out, &errb), args)
	}
	var out, errb bytes.Buffer
	run(context.Background(), []string{"-class", "Q"}, &out, &errb)
	assert.Contains(t, errb.String(), "unknown benchmark class")
}

// Without a launcher the program runs as a singleton job on the Global Arrays path.
func TestSingletonClassS(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-class", "S"}, &out, &errb)
	assert.Equal(t, 0, code, errb.String())
	s := out.String()
	for _, l := range []string{" Class = S\n", " Ranks = 1\n", " Verification = SUCCESSFUL\n", normS, "Global Arrays"} {
		assert.Contains(t, s, l)
	}
}

// Too few V-cycles: the norm misses the official value, the report says so and the status is 1.
func TestUnsuccessfulExitStatus(t *testing.T) {
	for _, args := range [][]string{{"-serial", "-niter", "2"}, {"-niter", "2"}} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		assert.Equal(t, 1, code, "%v: %s", args, errb.String())
		assert.Contains(t, out.String(), " Verification = UNSUCCESSFUL\n", args)
		assert.Contains(t, out.String(), "The correct L2 Norm is 5.3077070057340E-05", args)
	}
}

// -sim 16: the same program on 16 ranks of this process over the simulated network ibv/fabric,
// under testing/synctest (virtual time); the report is the real job's.
func TestSimClassS(t *testing.T) {
	if raceEnabled {
		t.Skip("full class S under the race detector; mgga's TestRunClassSFabric covers the fabric path")
	}
	synctest.Test(t, func(t *testing.T) {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"-class", "S", "-sim", "16"}, &out, &errb)
		assert.Equal(t, 0, code, errb.String())
		s := out.String()
		for _, l := range []string{" Class = S\n", " Ranks = 16\n", " Verification = SUCCESSFUL\n", normS, "simulated fabric"} {
			assert.Contains(t, s, l)
		}
	})
}
