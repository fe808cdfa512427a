package wire

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// samples is one packet of every kind and segment position the codec knows.
func samples() []Packet {
	pay := []byte("payload bytes")
	return []Packet{
		{Header: Header{Opcode: OpSend, Flags: FlagOnly | FlagAckReq, DestQPN: 7, PSN: 0xabcdef, SrcQPN: 9}, Payload: pay},
		{Header: Header{Opcode: OpSend, Flags: FlagFirst, DestQPN: 7, PSN: 1, SrcQPN: 9}, Payload: pay},
		{Header: Header{Opcode: OpSend, Flags: 0, DestQPN: 7, PSN: 2, SrcQPN: 9}, Payload: pay},
		{Header: Header{Opcode: OpSend, Flags: FlagLast | FlagImm | FlagAckReq, DestQPN: 7, PSN: 3, SrcQPN: 9, Imm: 0xdeadbeef}, Payload: pay},
		{Header: Header{Opcode: OpSend, Flags: FlagOnly}, Payload: []byte{}},
		{Header: Header{Opcode: OpWrite, Flags: FlagFirst, DestQPN: 1, PSN: PSNMask, SrcQPN: MaxQPN,
			RETH: RETH{VAddr: 0x7fff00001000, RKey: 0x1234, DMALen: 1 << 20}}, Payload: pay},
		{Header: Header{Opcode: OpWrite, Flags: 0, DestQPN: 1, PSN: 0}, Payload: pay},
		{Header: Header{Opcode: OpWrite, Flags: FlagLast | FlagImm | FlagMigReq, DestQPN: 1, PSN: 1, Imm: 42}, Payload: pay},
		{Header: Header{Opcode: OpWrite, Flags: FlagOnly | FlagAckReq, DestQPN: 1, PSN: 5,
			RETH: RETH{VAddr: 8, RKey: 3, DMALen: uint32(len(pay))}}, Payload: pay},
		{Header: Header{Opcode: OpReadReq, Flags: FlagOnly | FlagAckReq, DestQPN: 2, PSN: 100,
			RETH: RETH{VAddr: 0x1000, RKey: 77, DMALen: 16 << 20}}, Payload: []byte{}},
		{Header: Header{Opcode: OpReadResp, Flags: FlagFirst, DestQPN: 2, PSN: 100, AETH: AETH{SynAck, 12}}, Payload: pay},
		{Header: Header{Opcode: OpReadResp, Flags: 0, DestQPN: 2, PSN: 101, AETH: AETH{SynAck, 12}}, Payload: pay},
		{Header: Header{Opcode: OpReadResp, Flags: FlagLast, DestQPN: 2, PSN: 102, AETH: AETH{SynAck, 13}}, Payload: pay},
		{Header: Header{Opcode: OpAtomic, Flags: FlagOnly | FlagAckReq, DestQPN: 3, PSN: 4,
			Atomic: AtomicETH{VAddr: 0x2000, RKey: 5, SwapAdd: 1 << 60, Compare: 99, Op: AtomicCmpSwap64}}, Payload: []byte{}},
		{Header: Header{Opcode: OpAtomic, Flags: FlagOnly, Atomic: AtomicETH{Op: AtomicCmpSwap32, SwapAdd: 1}}, Payload: []byte{}},
		{Header: Header{Opcode: OpAccumulate, Flags: FlagFirst, DestQPN: 4, PSN: 8,
			RETH: RETH{VAddr: 0x3000, RKey: 6, DMALen: 4096}, Acc: AccETH{Type: 6, Scale: complex(1.5, -2.25)}}, Payload: pay},
		{Header: Header{Opcode: OpAccumulate, Flags: FlagLast | FlagAckReq, DestQPN: 4, PSN: 9}, Payload: pay},
		{Header: Header{Opcode: OpAck, Flags: FlagOnly, DestQPN: 5, PSN: 77, AETH: AETH{SynAck, 3}}, Payload: []byte{}},
		{Header: Header{Opcode: OpAck, Flags: FlagOnly, DestQPN: 5, PSN: 77, AETH: AETH{SynNakPSNSeq, 3}}, Payload: []byte{}},
		{Header: Header{Opcode: OpAck, Flags: FlagOnly, DestQPN: 5, PSN: 77, AETH: AETH{SynNakInvReq, 3}}, Payload: []byte{}},
		{Header: Header{Opcode: OpAck, Flags: FlagOnly, DestQPN: 5, PSN: 77, AETH: AETH{SynNakRemAccess, 3}}, Payload: []byte{}},
		{Header: Header{Opcode: OpAck, Flags: FlagOnly, DestQPN: 5, PSN: 77, AETH: AETH{SynNakRemOp, PSNMask}}, Payload: []byte{}},
		{Header: Header{Opcode: OpAck, Flags: FlagOnly, DestQPN: 5, PSN: 77, AETH: AETH{SynRNR, 0}}, Payload: []byte{}},
		{Header: Header{Opcode: OpAtomicAck, Flags: FlagOnly, DestQPN: 6, PSN: 78, AETH: AETH{SynAck, 4},
			AtomicAck: 0xfedcba9876543210}, Payload: []byte{}},
		{Header: Header{Opcode: OpUDSend, Flags: FlagOnly, DestQPN: 8, PSN: 0, SrcQPN: 11,
			DETH: DETH{QKey: 0x11111111, SrcQPN: 11}}, Payload: pay},
		{Header: Header{Opcode: OpUDSend, Flags: FlagOnly | FlagImm, DestQPN: 8, SrcQPN: 11,
			DETH: DETH{QKey: 1, SrcQPN: 11}, Imm: 5}, Payload: pay},
	}
}

func TestRoundTrip(t *testing.T) {
	buf := make([]byte, 0, 4096)
	for i, want := range samples() {
		b, err := Append(buf[:0], &want.Header, want.Payload)
		require.NoError(t, err, "sample %d", i)
		require.Equal(t, want.HeaderLen()+len(want.Payload), len(b), "sample %d length", i)
		var got Packet
		require.NoError(t, Decode(b, &got), "sample %d", i)
		require.Equal(t, want.Header, got.Header, "sample %d (%v)", i, want.Opcode)
		require.Equal(t, want.Payload, got.Payload, "sample %d payload", i)
		// every strict prefix and every one-byte extension is rejected
		for n := 0; n < len(b); n++ {
			require.ErrorIs(t, Decode(b[:n], &got), ErrMalformed, "sample %d prefix %d", i, n)
		}
		require.ErrorIs(t, Decode(append(b, 0), &got), ErrMalformed, "sample %d extended", i)
	}
}

func TestAppendNoAlloc(t *testing.T) {
	s := samples()[5]
	buf := make([]byte, 0, 256)
	var p Packet
	allocs := testing.AllocsPerRun(100, func() {
		b, _ := Append(buf[:0], &s.Header, s.Payload)
		_ = Decode(b, &p)
	})
	require.Zero(t, allocs)
}

func TestDecodeRejects(t *testing.T) {
	good, err := Append(nil, &Header{Opcode: OpWrite, Flags: FlagOnly, RETH: RETH{DMALen: 4}}, []byte{1, 2, 3, 4})
	require.NoError(t, err)
	mut := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	var p Packet
	cases := map[string][]byte{
		"version":      mut(func(b []byte) { b[0] = 2 }),
		"opcode0":      mut(func(b []byte) { b[1] = 0 }),
		"opcodeHigh":   mut(func(b []byte) { b[1] = 200 }),
		"flags":        mut(func(b []byte) { b[2] |= 0x80 }),
		"reserved":     mut(func(b []byte) { b[3] = 1 }),
		"qpn":          mut(func(b []byte) { b[7] = 1 }),
		"lyingLenUp":   mut(func(b []byte) { b[16]++ }),
		"lyingLenDown": mut(func(b []byte) { b[16]-- }),
		"hugeLen":      mut(func(b []byte) { b[19] = 0xff }),
		"dmaShort":     mut(func(b []byte) { b[BTHLen+12] = 2 }),
		"nil":          nil,
	}
	for name, b := range cases {
		err := Decode(b, &p)
		require.Error(t, err, name)
		require.True(t, errors.Is(err, ErrMalformed), name)
	}
	// encoder refuses what the decoder would refuse
	_, err = AppendHeader(nil, &Header{Opcode: OpAck, Flags: FlagFirst}, 0)
	require.ErrorIs(t, err, ErrMalformed)
	_, err = AppendHeader(nil, &Header{Opcode: OpReadReq, Flags: FlagOnly}, 3)
	require.ErrorIs(t, err, ErrMalformed)
	_, err = AppendHeader(nil, &Header{Opcode: OpSend, Flags: FlagFirst | FlagImm}, 0)
	require.ErrorIs(t, err, ErrMalformed)
	_, err = AppendHeader(nil, &Header{Opcode: OpAtomic, Flags: FlagOnly}, 0)
	require.ErrorIs(t, err, ErrMalformed)
	_, err = AppendHeader(nil, &Header{Opcode: OpAccumulate, Flags: FlagFirst, Acc: AccETH{Type: 9}}, 0)
	require.ErrorIs(t, err, ErrMalformed)
}

func TestPSNArith(t *testing.T) {
	require.Equal(t, uint32(0), PSNAdd(PSNMask, 1))
	require.Equal(t, uint32(5), PSNAdd(PSNMask-4, 10))
	require.Equal(t, int32(1), PSNDiff(0, PSNMask))
	require.Equal(t, int32(-1), PSNDiff(PSNMask, 0))
	require.Equal(t, int32(100), PSNDiff(150, 50))
}

func FuzzDecode(f *testing.F) {
	for _, s := range samples() {
		b, err := Append(nil, &s.Header, s.Payload)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{Version})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Packet
		err := Decode(b, &p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// whatever decodes re-encodes to the same bytes
		out, err := Append(nil, &p.Header, p.Payload)
		if err != nil {
			t.Fatalf("decoded packet does not re-encode: %v", err)
		}
		if string(out) != string(b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, out)
		}
	})
}
