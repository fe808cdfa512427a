package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The patterns on 8 ranks over each transport: every put reaches its target (the job checks
// every rank's slots: the last value each origin put there, also across the adaptive
// transport's switches between the shared path and RC), and the tables hold one positive figure
// per pattern and mode, and adaptive's changes in %.
func TestAQPSSim(t *testing.T) {
	o := AQPSSimOptions{Ranks: 8, Messages: 100, RCWindow: 20 * time.Millisecond}
	res, err := AQPSSim(context.Background(), o, bubbleOf(t))
	require.NoError(t, err)
	require.Len(t, res, 3)
	for _, r := range res {
		require.Equal(t, []string{"rc (us)", "dc (us)", "adaptive (us)", "adaptive vs dc (%)", "adaptive vs rc (%)"}, r.Columns)
		require.Len(t, r.Rows, 1)
		require.Equal(t, 8, r.Rows[0].Size)
		v := r.Rows[0].Values
		for i := range 3 {
			require.Positive(t, v[i], "%s %s", r.Name, r.Columns[i])
		}
		require.InDelta(t, 100*(v[2]/v[1]-1), v[3], 1e-9)
		require.InDelta(t, 100*(v[2]/v[0]-1), v[4], 1e-9)
		t.Log(r.Name, v)
	}
	t.Log(res[0].Header)
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
	require.NoError(t, CheckAQPSSlots(n, messages, good()))
	s := good()
	s[2][0] = aqpsValue(aqpsRepeat, 0, 1)
	require.Error(t, CheckAQPSSlots(n, messages, s), "an earlier put")
	s = good()
	s[0][3] = 0
	require.Error(t, CheckAQPSSlots(n, messages, s), "a lost put")
	s = good()
	s[1][2] = 1
	require.Error(t, CheckAQPSSlots(n, messages, s), "a put nobody made")
	require.Error(t, CheckAQPSSlots(n, messages, s[:3]))
}

// Unknown modes and bad sizes are refused before any job runs.
func TestAQPSSimOptions(t *testing.T) {
	never := func(func()) { t.Fatal("a job ran") }
	for _, o := range []AQPSSimOptions{{Ranks: 1}, {Ranks: 8, Messages: -1}, {Ranks: 8, Modes: []string{"ud"}}} {
		_, err := AQPSSim(context.Background(), o, never)
		require.ErrorIs(t, err, ErrOptions, "%+v", o)
	}
}
