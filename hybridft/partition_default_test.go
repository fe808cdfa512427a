package hybridft

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/internal/config"
)

// defaultOptions are the Options rma gives a Manager under the default configuration (no
// GOARMCI_* override): rma's ftOptions of config.Default(), whose mapping rma's
// TestFTOptionsPartitionTimeout checks.
func defaultOptions() Options {
	c := config.Default()
	return Options{APM: c.APM, APMTest: c.APMTest, PartitionTimeout: c.PartitionTimeout,
		AckTimeout: c.AckTimeout, RetryCount: c.RetryCount}
}

// The configuration's default partition timeout is finite, and the same as Options' own default.
func TestPartitionTimeoutDefaults(t *testing.T) {
	require.Equal(t, DefaultPartitionTimeout, defaultOptions().PartitionTimeout)
}

// With the default configuration (no GOARMCI_* override), on the simulated fabric under virtual
// time: a permanent partition ends every blocked request with ErrPartition once the 30 s default
// has passed, and later posts are refused with it; a partition that heals after 10 s — long for
// a transient fault — does not trip it, and every request completes.
func TestFabricPartitionDefaultTimeout(t *testing.T) {
	defaults := defaultOptions
	t.Run("permanent", func(t *testing.T) {
		forSeeds(t, func(t *testing.T, seed uint64) {
			// virtual time: detection (retries on both paths) plus the 30 s default
			requirePermanentPartition(t, defaults(), seed, DefaultPartitionTimeout, 5*time.Second)
		})
	})
	t.Run("heals", func(t *testing.T) {
		forSeeds(t, func(t *testing.T, seed uint64) {
			nw := newFabNet(t, defaults(), 2, 1<<20, noise(seed, 2))
			a, b := nw.a, nw.b
			for i := range a.buf {
				a.buf[i] = byte(i*5 + int(seed))
			}
			until := nw.f.Now() + 10*time.Second
			var p fabric.Plan
			p.Partition([]int{0}, []int{1}, 0, until)
			require.NoError(t, nw.f.Apply(p))
			cl := newCollector(a.ep)
			for i := 0; i < 16; i++ {
				nw.write(t, cl, i, 8<<10)
			}
			cl.waitAll(t, 16)
			require.GreaterOrEqual(t, nw.f.Now(), until, "nothing completes while partitioned")
			requireAllOK(t, cl)
			require.True(t, bytes.Equal(a.buf[:16*(8<<10)], b.buf[:16*(8<<10)]))
			for _, c := range a.conns {
				require.NoError(t, c.Err())
			}
		})
	})
}
