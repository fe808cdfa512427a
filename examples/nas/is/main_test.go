package main

import (
	"testing"

	"github.com/goarmci/goarmci/examples/nas/internal/driver/drivertest"
)

func TestSerialClassSReport(t *testing.T) {
	drivertest.Check(t, run, []string{"-serial", "-class", "S"}, 0,
		drivertest.ClassS(1, " Time in seconds = ", " Mop/s total = ", " Size = 65536\n")...)
}

func TestBadClass(t *testing.T) {
	drivertest.BadClass(t, run)
}

// Without a launcher the program runs as a singleton job on the Global Arrays path.
func TestSingletonClassS(t *testing.T) {
	drivertest.Check(t, run, []string{"-class", "S"}, 0, drivertest.ClassS(1, "Global Arrays")...)
}

func TestSerialBuckets(t *testing.T) {
	drivertest.Check(t, run, []string{"-serial", "-buckets", "-class", "S"}, 0, " Verification = SUCCESSFUL\n", "buckets")
}
