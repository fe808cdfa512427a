package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/rma"
)

// The patterns on 8 ranks over RC: every put reaches its target (the job checks every rank's
// slots: the last value each origin put there), and the tables hold one positive figure per
// pattern.
func TestAQPSSim(t *testing.T) {
	res, err := AQPSSim(context.Background(), AQPSSimOptions{Ranks: 8, Messages: 3, Modes: []string{rma.NetRC}}, bubbleOf(t))
	require.NoError(t, err)
	require.Len(t, res, 3)
	for _, r := range res {
		require.Equal(t, []string{"rc (us)"}, r.Columns)
		require.Len(t, r.Rows, 1)
		require.Equal(t, 8, r.Rows[0].Size)
		require.Positive(t, r.Rows[0].Values[0], r.Name)
		t.Log(r.Name, r.Rows[0].Values)
	}
}

// The slots check finds a missing or a wrong put.
func TestAQPSSlotsCheck(t *testing.T) {
	const n, messages = 4, 2 // onetoall: rank 0 puts to 1, 2, 3, 1, 2, 3
	good := func() [][]uint64 {
		s := make([][]uint64, n)
		for i := range s {
			s[i] = make([]uint64, n)
		}
		for r := 1; r < n; r++ {
			s[0][r] = aqpsValue(aqpsRepeat, 1, messages-1)
		}
		s[1][0], s[2][0], s[3][0] = aqpsValue(aqpsRepeat, 0, 3), aqpsValue(aqpsRepeat, 0, 4), aqpsValue(aqpsRepeat, 0, 5)
		return s
	}
	require.NoError(t, checkAQPSSlots(n, messages, good()))
	s := good()
	s[2][0] = aqpsValue(aqpsRepeat, 0, 1)
	require.Error(t, checkAQPSSlots(n, messages, s), "an earlier put")
	s = good()
	s[0][3] = 0
	require.Error(t, checkAQPSSlots(n, messages, s), "a lost put")
	s = good()
	s[1][2] = 1
	require.Error(t, checkAQPSSlots(n, messages, s), "a put nobody made")
	require.Error(t, checkAQPSSlots(n, messages, s[:3]))
}

// Unknown modes and bad sizes are refused before any job runs.
func TestAQPSSimOptions(t *testing.T) {
	never := func(func()) { t.Fatal("a job ran") }
	for _, o := range []AQPSSimOptions{{Ranks: 1}, {Ranks: 8, Messages: -1}, {Ranks: 8, Modes: []string{"ud"}}} {
		_, err := AQPSSim(context.Background(), o, never)
		require.ErrorIs(t, err, ErrOptions, "%+v", o)
	}
}
