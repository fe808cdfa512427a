package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
)

// TestClassSAcrossTwoHosts runs MG class S on two hosts (network namespaces whose rail meets in a
// switch, ranks started as srun starts them) with one and with two ranks per host: the run
// verifies, and the ghost exchanges cross the link (host 1 receives megabytes). It skips without
// root.
func TestClassSAcrossTwoHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two to four processes")
	}
	tb := testutil.NewSwitchedTestbed(t, 2, 1)
	for perHost := 1; perHost <= 2; perHost++ {
		t.Run(fmt.Sprintf("ranks-per-host=%d", perHost), func(t *testing.T) {
			rx0, _ := tb.Bytes(1, 0)
			testutil.RunKernel(t, tb, perHost, 24000+os.Getpid()%1000+10*perHost, "-class", "S")
			rx1, _ := tb.Bytes(1, 0)
			require.Greater(t, rx1-rx0, uint64(1<<20), "host 1 received less than 1 MiB")
		})
	}
}
