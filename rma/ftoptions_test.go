package rma

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/internal/config"
)

// The configuration reaches the fault-tolerance manager: the default partition timeout is
// hybridft's (finite); GOARMCI_PARTITION_TIMEOUT=0, set explicitly, is "no timeout" (negative);
// the APM and RC retry knobs pass through.
func TestFTOptionsPartitionTimeout(t *testing.T) {
	c := config.Default()
	o := ftOptions(c)
	require.Equal(t, hybridft.DefaultPartitionTimeout, o.PartitionTimeout)
	require.Equal(t, c.APM, o.APM)
	require.Equal(t, c.AckTimeout, o.AckTimeout)
	require.Equal(t, c.RetryCount, o.RetryCount)
	require.NoError(t, c.Set("GOARMCI_PARTITION_TIMEOUT", "0"))
	require.Negative(t, ftOptions(c).PartitionTimeout, "explicit 0: only the context bounds the wait")
	require.NoError(t, c.Set("GOARMCI_PARTITION_TIMEOUT", "2m"))
	require.Equal(t, 2*time.Minute, ftOptions(c).PartitionTimeout)
	require.NoError(t, c.Set("GOARMCI_APM_TEST", "1s"))
	require.Equal(t, time.Second, ftOptions(c).APMTest)
}
