package main

import (
	"os"
	"testing"

	"github.com/goarmci/goarmci/internal/testutil"
)

// TestClassAFourHosts runs IS class A on 4 hosts × 2 ranks joined by 2 rails through a switch
// (a bridge per rail; ranks of one host share memory): the run verifies. It skips without root.
func TestClassAFourHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs eight processes")
	}
	tb := testutil.NewSwitchedTestbed(t, 4, 2)
	testutil.RunKernel(t, tb, 2, 27000+os.Getpid()%1000, "-class", "A")
}
