package main

import (
	"testing"

	"github.com/goarmci/goarmci/examples/nas/internal/driver/drivertest"
)

const lastS = " Checksum = 5.542683411903E+02 4.932597244941E+02"

func TestSerialClassSReport(t *testing.T) {
	drivertest.Check(t, run, []string{"-serial", "-class", "S"}, 0, drivertest.ClassS(1,
		" FT Benchmark Completed.\n", " Size = 64x64x64\n", " Iterations = 6\n", " Time in seconds = ",
		" Mop/s total = ", lastS, " T =    1     Checksum =     5.546087004964E+02    4.845363331978E+02\n")...)
}

func TestBadFlags(t *testing.T) {
	drivertest.BadClass(t, run)
	for _, args := range [][]string{{"-niter", "-1"}, {"-sim", "-2"}} {
		drivertest.Check(t, run, args, 2)
	}
}

// Without a launcher the program runs as a singleton job on the Global Arrays path.
func TestSingletonClassS(t *testing.T) {
	drivertest.Check(t, run, []string{"-class", "S"}, 0, drivertest.ClassS(1, lastS, "Global Arrays")...)
}

// Fewer steps than the class's: the report says the run did not verify and the status is 1.
func TestUnsuccessfulExitStatus(t *testing.T) {
	for _, args := range [][]string{{"-serial", "-niter", "2"}, {"-niter", "2"}} {
		drivertest.Check(t, run, args, 1, " Verification = UNSUCCESSFUL\n",
			"The correct checksum of step 2 is 5.546385409189E+02 4.865304269511E+02")
	}
}

// -sim 8: the same program on 8 ranks of this process over the simulated network ibv/fabric,
// under testing/synctest (virtual time); the report is the real job's.
func TestSimClassS(t *testing.T) {
	if raceEnabled {
		t.Skip("full class S under the race detector; ftga's TestRunClassSFabric covers the fabric path")
	}
	drivertest.Sim(t, run, 8, lastS)
}
