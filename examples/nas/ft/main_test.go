package main

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
)

const lastS = " Checksum = 5.542683411903E+02 4.932597244941E+02"

func TestSerialClassSReport(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-serial", "-class", "S"}, &out, &errb)
	assert.Equal(t, 0, code, errb.String())
	s := out.String()
	for _, l := range []string{" FT Benchmark Completed.\n", " Class = S\n", " Size = 64x64x64\n",
		" Iterations = 6\n", " Ranks = 1\n", " Verification = SUCCESSFUL\n", " Time in seconds = ",
		" Mop/s total = ", lastS, " T =    1     Checksum =     5.546087004964E+02    4.845363331978E+02\n"} {
		assert.Contains(t, s, l)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-class", "Q"}, {"-niter", "-1"}, {"-sim", "-2"}} {
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
	for _, l := range []string{" Class = S\n", " Ranks = 1\n", " Verification = SUCCESSFUL\n", lastS, "Global Arrays"} {
		assert.Contains(t, s, l)
	}
}

// Fewer steps than the class's: the report says the run did not verify and the status is 1.
func TestUnsuccessfulExitStatus(t *testing.T) {
	for _, args := range [][]string{{"-serial", "-niter", "2"}, {"-niter", "2"}} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		assert.Equal(t, 1, code, "%v: %s", args, errb.String())
		assert.Contains(t, out.String(), " Verification = UNSUCCESSFUL\n", args)
		assert.Contains(t, out.String(), "The correct checksum of step 2 is 5.546385409189E+02 4.865304269511E+02", args)
	}
}

// -sim 8: the same program on 8 ranks of this process over the simulated network ibv/fabric,
// under testing/synctest (virtual time); the report is the real job's.
func TestSimClassS(t *testing.T) {
	if raceEnabled {
		t.Skip("full class S under the race detector; ftga's TestRunClassSFabric covers the fabric path")
	}
	synctest.Test(t, func(t *testing.T) {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"-class", "S", "-sim", "8"}, &out, &errb)
		assert.Equal(t, 0, code, errb.String())
		s := out.String()
		for _, l := range []string{" Class = S\n", " Ranks = 8\n", " Verification = SUCCESSFUL\n", lastS, "simulated fabric"} {
			assert.Contains(t, s, l)
		}
	})
}
