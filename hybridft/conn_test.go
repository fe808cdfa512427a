package hybridft

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConnInfoRoundTrip(t *testing.T) {
	for _, ci := range []ConnInfo{
		{},
		{Addr: "169.254.10.1:40123", LID: 7, QPN: 1 << 23, PSN: 0xabcdef},
		{Addr: "job/rank3", LID: 0xffff, QPN: 0xffffffff, PSN: 1},
	} {
		got, err := UnmarshalConnInfo(ci.Marshal())
		require.NoError(t, err)
		require.Equal(t, ci, got)
	}
}

func TestConnInfoRejectsMalformed(t *testing.T) {
	good := ConnInfo{Addr: "127.0.0.1:1", QPN: 3}.Marshal()
	bad := [][]byte{nil, good[:5], good[:len(good)-1], append(append([]byte{}, good...), 0), append([]byte{9}, good[1:]...)}
	for i, b := range bad {
		_, err := UnmarshalConnInfo(b)
		require.True(t, errors.Is(err, ErrMalformed), "case %d: %v", i, err)
	}
}

func FuzzUnmarshalConnInfo(f *testing.F) {
	f.Add(ConnInfo{Addr: "127.0.0.1:1", QPN: 3, PSN: 9}.Marshal())
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ci, err := UnmarshalConnInfo(b)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		require.Equal(t, b, ci.Marshal(), "a decoded blob re-encodes to itself")
	})
}
