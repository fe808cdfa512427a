package main

import (
	"strings"
	"testing"

	"github.com/goarmci/goarmci/examples/nas/internal/driver/drivertest"
)

const zetaS = " Zeta = 8.5971775078648E+00\n"

func TestSerialClassSReport(t *testing.T) {
	drivertest.Check(t, run, []string{"-serial", "-class", "S"}, 0,
		drivertest.ClassS(1, " Time in seconds = ", " Mop/s total = ", zetaS)...)
}

func TestBadClass(t *testing.T) {
	drivertest.BadClass(t, run)
}

// Without a launcher the program runs as a singleton job on the Global Arrays path.
func TestSingletonClassS(t *testing.T) {
	if raceEnabled {
		t.Skip("full class S under the race detector; TestUnsuccessfulExitStatus covers the path")
	}
	drivertest.Check(t, run, []string{"-class", "S"}, 0, drivertest.ClassS(1, zetaS, "Global Arrays")...)
}

// Too few iterations: zeta misses the official value, the report says so and the status is 1.
func TestUnsuccessfulExitStatus(t *testing.T) {
	for _, args := range [][]string{{"-serial", "-niter", "2"}, {"-niter", "2"}} {
		drivertest.Check(t, run, args, 1, " Verification = UNSUCCESSFUL\n")
	}
	drivertest.Check(t, run, []string{"-niter", "-1"}, 2)
}

// -sim 16: the same program on 16 ranks of this process over the simulated network ibv/fabric,
// under testing/synctest (virtual time); the report is the real job's.
func TestSimClassS(t *testing.T) {
	if raceEnabled {
		t.Skip("full class S under the race detector; cgga's TestRunClassSFabric covers the fabric path")
	}
	drivertest.Sim(t, run, 16, zetaS)
}

func TestSimBadRanks(t *testing.T) {
	if _, errb := drivertest.Check(t, run, []string{"-sim", "-1"}, 2); !strings.Contains(errb, "-sim -1") {
		t.Errorf("stderr does not name -sim -1:\n%s", errb)
	}
}
