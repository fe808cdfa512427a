package window

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/internal/testutil"
	"github.com/goarmci/goarmci/rma"
)

const fenceChildEnv = "GOARMCI_TEST_WINDOW_CHILD"

// TestFencePartitionNetns: MPI_Win_fence across a network partition, two hosts joined by two
// rails, GOARMCI_PARTITION_TIMEOUT=3s (issue 5: "no hang anywhere, barriers included"). Both
// rails down for 0.5 s while rank 0 waits in a fence and rank 1 enters it late: the fence
// completes. Both rails down for good: rank 0, which only waits (its flag write got through),
// and rank 1, whose write cannot, both get an error that errors.Is(err, rma.ErrPartition): the
// waiting rank probes the rank it waits for (pollLocal). Times are logged; a hang is caught by
// the children's context. Skips without root, and with -short.
func TestFencePartitionNetns(t *testing.T) {
	if os.Getenv(fenceChildEnv) == "fence" {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		rt, err := rma.Init(ctx, nil)
		require.NoError(t, err)
		w, err := Allocate(ctx, rt, 64, 8)
		require.NoError(t, err)
		fence := func(ctx context.Context) error { return w.Fence(ctx, 0) }
		testutil.PartitionSteps(ctx, t, rt.Rank(), fence, func(err error) bool { return errors.Is(err, rma.ErrPartition) })
		return // no Free or Finalize: they synchronize too; the process exits
	}
	testutil.PartitionTest(t, "TestFencePartitionNetns", fenceChildEnv+"=fence", 33100)
}
