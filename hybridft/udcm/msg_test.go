package udcm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMsgRoundTrip(t *testing.T) {
	for _, m := range []Msg{
		{Type: REQ, Dst: 1, Src: 2, Seq: 3, Port: 1, PeerPort: 2, Ports: 3, QPN: 7, PSN: 0xabcdef, Inc: 4, EPSN: 12, Need: 3,
			Atomics: []Atomic{{PSN: 11, Value: 99}, {PSN: 12, Value: 1 << 60}}},
		{Type: REP, Status: StatusPathDown, Dst: ^uint64(0), Src: 5, Seq: 1 << 31, Ports: 1, Atomics: []Atomic{}},
		{Type: ACK, Dst: 9, Src: 8, Seq: 4, Atomics: []Atomic{}},
	} {
		b, err := m.Append(nil)
		require.NoError(t, err)
		var got Msg
		require.NoError(t, got.Decode(b))
		if got.Atomics == nil {
			got.Atomics = []Atomic{}
		}
		require.Equal(t, m, got)
	}
}

func TestMsgRejects(t *testing.T) {
	_, err := (&Msg{Type: 9}).Append(nil)
	require.ErrorIs(t, err, ErrMalformed)
	_, err = (&Msg{Type: REQ, PSN: 1 << 24}).Append(nil)
	require.ErrorIs(t, err, ErrMalformed)
	good, err := (&Msg{Type: REQ, Atomics: []Atomic{{1, 2}}}).Append(nil)
	require.NoError(t, err)
	var m Msg
	for _, b := range [][]byte{nil, good[:10], good[:len(good)-1], append(append([]byte{}, good...), 0),
		append([]byte{2}, good[1:]...)} {
		require.ErrorIs(t, m.Decode(b), ErrMalformed)
	}
}

func FuzzMsgDecode(f *testing.F) {
	b, _ := (&Msg{Type: REP, Seq: 2, Atomics: []Atomic{{3, 4}}}).Append(nil)
	f.Add(b)
	f.Add([]byte{Version})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Msg
		if err := m.Decode(b); err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		out, err := m.Append(nil)
		require.NoError(t, err)
		require.Equal(t, b, out, "a decoded message re-encodes to itself")
	})
}
