package bench

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// -alg: "auto" names Barrier's own choice, not an algorithm of the list; unknown names are
// refused.
func TestBarrierAlgs(t *testing.T) {
	algs, err := BarrierAlgs("auto")
	require.NoError(t, err)
	require.Empty(t, algs)
	require.True(t, hasAuto("auto"))
	algs, err = BarrierAlgs("auto, rgm")
	require.NoError(t, err)
	require.Equal(t, []rma.BarrierAlg{rma.BarrierRGM}, algs)
	require.True(t, hasAuto("auto, rgm"))
	require.False(t, hasAuto("all"))
	_, err = BarrierAlgs("fastest")
	require.ErrorIs(t, err, ErrOptions)
}
