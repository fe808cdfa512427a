package rma_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goarmci/goarmci/rma"
	"github.com/goarmci/goarmci/rma/rmatest"
)

// Ranks that are goroutines of one process are never bound to cores (GOARMCI_BIND=auto binds
// only a process that holds one rank): the test process may still run on every CPU it could
// before the job.
func TestInProcessRanksNotBound(t *testing.T) {
	var before, after unix.CPUSet
	require.NoError(t, unix.SchedGetaffinity(0, &before))
	rmatest.Run(t, 2, func(ctx context.Context, t testing.TB, rt *rma.Runtime) {
		require.NoError(t, rt.Barrier(ctx))
	})
	require.NoError(t, unix.SchedGetaffinity(0, &after))
	require.Equal(t, before, after)
}
