package hybridft

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv/fabric"
	"github.com/goarmci/goarmci/internal/config"
)

// The configuration's default partition timeout reaches the manager: finite, and the same as
// Options' own default; GOARMCI_PARTITION_TIMEOUT=0, set explicitly, is "no timeout".
func TestPartitionTimeoutDefaults(t *testing.T) {
	require.Equal(t, DefaultPartitionTimeout, OptionsFrom(config.Default()).PartitionTimeout)
	c := config.Default()
	require.NoError(t, c.Set("GOARMCI_PARTITION_TIMEOUT", "0"))
	require.Negative(t, OptionsFrom(c).PartitionTimeout, "explicit 0: only the context bounds the wait")
	require.NoError(t, c.Set("GOARMCI_PARTITION_TIMEOUT", "2m"))
	require.Equal(t, 2*time.Minute, OptionsFrom(c).PartitionTimeout)
}

// With the default configuration (no GOARMCI_* override), on the simulated fabric under virtual
// time: a permanent partition ends every blocked request with ErrPartition once the 30 s default
// has passed, and later posts are refused with it; a partition that heals after 10 s — long for
// a transient fault — does not trip it, and every request completes.
func TestFabricPartitionDefaultTimeout(t *testing.T) {
	defaults := func() Options { return OptionsFrom(config.Default()) }
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
