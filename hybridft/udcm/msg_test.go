package udcm

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMsgRoundTrip(t *testing.T) {
	for _, m := range []Msg{
		{Type: REQ, Dst: 1, Src: 2, Seq: 3, Port: 1, PeerPort: 2, Ports: 3, QPN: 7, PSN: 0xabcdef, Inc: 4, EPSN: 12, Need: 3,
			Atomics: []Atomic{{PSN: 11, Value: 99}, {PSN: 12, Value: 1 << 60}}},
		{Type: REP, Status: StatusPathDown, Dst: ^uint64(0), Src: 5, Seq: 1 << 31, Ports: 1, Atomics: []Atomic{}},
		{Type: ACK, Dst: 9, Src: 8, Seq: 4, Atomics: []Atomic{}},
		{Type: ConnREQ, Dst: 3, Src: 1, Seq: 77, Inc: 0xdeadbeef, Atomics: []Atomic{}, Payload: []byte("rail infos")},
		{Type: ConnREP, Dst: 1, Src: 3, Seq: 77, Inc: 5, Atomics: []Atomic{}, Payload: bytes.Repeat([]byte{0xa5}, MaxPayload)},
		{Type: ConnRTU, Dst: 3, Src: 1, Seq: 77, Inc: 5, Atomics: []Atomic{}, Payload: []byte{}},
		{Type: ConnREJ, Status: RejResources, Dst: 1, Src: 3, Seq: 77, Inc: 5, Atomics: []Atomic{}, Payload: []byte{}},
		{Type: ConnDREQ, Dst: 1, Src: 3, Seq: 77, Inc: 5, Atomics: []Atomic{}, Payload: []byte("address")},
		{Type: ConnDREP, Dst: 3, Src: 1, Seq: 77, Inc: 5, Atomics: []Atomic{}, Payload: []byte{}},
	} {
		b, err := m.Append(nil)
		require.NoError(t, err)
		var got Msg
		require.NoError(t, got.Decode(b))
		if got.Atomics == nil {
			got.Atomics = []Atomic{}
		}
		if m.Payload == nil {
			m.Payload = []byte{}
		}
		if got.Payload == nil {
			got.Payload = []byte{}
		}
		require.Equal(t, m, got)
		require.LessOrEqual(t, len(b), MaxLen, "%v", m.Type)
	}
}

// The first version's messages (no Conn types) keep their encoding but for the Version byte:
// 50 bytes plus 12 per atomic result (the MAC follows in the datagram, Seal).
func TestMsgOldFormatUnchanged(t *testing.T) {
	b, err := (&Msg{Type: REP, Seq: 2, Atomics: []Atomic{{3, 4}}}).Append(nil)
	require.NoError(t, err)
	require.Len(t, b, 50+12)
	require.Equal(t, byte(Version), b[0])
	require.Equal(t, byte(REP), b[1])
	require.Equal(t, "CONN_REQ", ConnREQ.String())
	require.True(t, ConnREJ.Conn())
	require.True(t, ConnDREP.Conn())
	require.Equal(t, "CONN_DREQ", ConnDREQ.String())
	require.False(t, ACK.Conn())
}

// Decode copies the payload out of the datagram (the CM reposts its receive buffer).
func TestMsgPayloadCopied(t *testing.T) {
	b, err := (&Msg{Type: ConnREQ, Payload: []byte{1, 2, 3}}).Append(nil)
	require.NoError(t, err)
	var m Msg
	require.NoError(t, m.Decode(b))
	b[len(b)-1] = 9
	require.Equal(t, []byte{1, 2, 3}, m.Payload)
}

func TestMsgRejectsPayload(t *testing.T) {
	for _, m := range []Msg{
		{Type: REQ, Payload: []byte{1}},                      // payload on an old type
		{Type: ConnREQ, Atomics: []Atomic{{1, 2}}},           // atomics on a Conn type
		{Type: ConnREP, Payload: make([]byte, MaxPayload+1)}, // oversized
		{Type: ConnDREP + 1},                                 // unknown type
	} {
		_, err := m.Append(nil)
		require.ErrorIs(t, err, ErrMalformed, "%v", m.Type)
	}
	good, err := (&Msg{Type: ConnREP, Payload: []byte{7, 8, 9}}).Append(nil)
	require.NoError(t, err)
	withAtomic := append([]byte{}, good...)
	withAtomic[49] = 1
	big := append([]byte{}, good[:headerLen]...)
	big = binary.LittleEndian.AppendUint16(big, MaxPayload+1)
	big = append(big, make([]byte, MaxPayload+1)...)
	lying := append([]byte{}, good...)
	binary.LittleEndian.PutUint16(lying[headerLen:], 4) // says 4, carries 3
	var m Msg
	for i, b := range [][]byte{good[:headerLen], good[:headerLen+1], good[:len(good)-1], append(append([]byte{}, good...), 0),
		withAtomic, big, lying} {
		require.ErrorIs(t, m.Decode(b), ErrMalformed, "case %d", i)
	}
}

func TestMsgRejects(t *testing.T) {
	_, err := (&Msg{Type: ConnDREP + 1}).Append(nil)
	require.ErrorIs(t, err, ErrMalformed)
	_, err = (&Msg{Type: REQ, PSN: 1 << 24}).Append(nil)
	require.ErrorIs(t, err, ErrMalformed)
	good, err := (&Msg{Type: REQ, Atomics: []Atomic{{1, 2}}}).Append(nil)
	require.NoError(t, err)
	var m Msg
	for _, b := range [][]byte{nil, good[:10], good[:len(good)-1], append(append([]byte{}, good...), 0),
		append([]byte{Version - 1}, good[1:]...), append([]byte{Version + 1}, good[1:]...)} {
		require.ErrorIs(t, m.Decode(b), ErrMalformed)
	}
}

func FuzzMsgDecode(f *testing.F) {
	b, _ := (&Msg{Type: REP, Seq: 2, Atomics: []Atomic{{3, 4}}}).Append(nil)
	f.Add(b)
	f.Add([]byte{Version})
	b, _ = (&Msg{Type: ConnREQ, Src: 1, Dst: 2, Seq: 3, Inc: 4, Payload: []byte("infos")}).Append(nil)
	f.Add(b)
	b, _ = (&Msg{Type: ConnRTU}).Append(nil)
	f.Add(b)
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
