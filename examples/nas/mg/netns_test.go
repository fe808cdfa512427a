package main

import (
	"os"
	"testing"

	"github.com/goarmci/goarmci/internal/testutil"
)

// TestClassSAcrossTwoHosts runs MG class S on two hosts (network namespaces whose rail meets in a
// switch, ranks started as srun starts them) with one and with two ranks per host: the run
// verifies, and the ghost exchanges cross the link (host 1 receives megabytes). It skips without
// root.
func TestClassSAcrossTwoHosts(t *testing.T) {
	testutil.RunKernelAcrossTwoHosts(t, 24000+os.Getpid()%1000, 1<<20, "-class", "S")
}
