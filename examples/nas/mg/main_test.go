package main

import (
	"testing"

	"github.com/goarmci/goarmci/examples/nas/internal/driver/drivertest"
)

const normS = " L2 Norm = 5.30770700573"

func TestSerialClassSReport(t *testing.T) {
	drivertest.Check(t, run, []string{"-serial", "-class", "S"}, 0, drivertest.ClassS(1,
		" MG Benchmark Completed.\n", " Size = 32x32x32\n", " Iterations = 4\n", " Time in seconds = ",
		" Mop/s total = ", normS, "  iter    4\n")...)
}

func TestBadFlags(t *testing.T) {
	drivertest.BadClass(t, run)
	for _, args := range [][]string{{"-niter", "-1"}, {"-replicate", "0"}, {"-replicate", "-2"}} {
		drivertest.Check(t, run, args, 2)
	}
}

// Without a launcher the program runs as a singleton job on the Global Arrays path.
func TestSingletonClassS(t *testing.T) {
	drivertest.Check(t, run, []string{"-class", "S"}, 0, drivertest.ClassS(1, normS, "Global Arrays")...)
}

// Too few V-cycles: the norm misses the official value, the report says so and the status is 1.
func TestUnsuccessfulExitStatus(t *testing.T) {
	for _, args := range [][]string{{"-serial", "-niter", "2"}, {"-niter", "2"}} {
		drivertest.Check(t, run, args, 1, " Verification = UNSUCCESSFUL\n", "The correct L2 Norm is 5.3077070057340E-05")
	}
}

// -sim 16: the same program on 16 ranks of this process over the simulated network ibv/fabric,
// under testing/synctest (virtual time); the report is the real job's.
func TestSimClassS(t *testing.T) {
	if raceEnabled {
		t.Skip("full class S under the race detector; mgga's TestRunClassSFabric covers the fabric path")
	}
	drivertest.Sim(t, run, 16, normS)
}
