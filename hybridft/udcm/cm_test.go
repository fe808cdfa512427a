package udcm

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/wire"
	"github.com/goarmci/goarmci/internal/secret"
)

func TestSeal(t *testing.T) {
	k, _ := secret.New()
	o, _ := secret.New()
	b, err := (&Msg{Type: ConnREQ, Src: 1, Dst: 2, Payload: []byte("x")}).Append(nil)
	require.NoError(t, err)
	s := seal(k, append([]byte(nil), b...))
	require.Len(t, s, len(b)+MACLen)
	got, err := unseal(k, s)
	require.NoError(t, err)
	require.Equal(t, b, got)
	_, err = unseal(o, s)
	require.ErrorIs(t, err, ErrBadMAC)
	_, err = unseal(secret.Key{}, s)
	require.ErrorIs(t, err, ErrBadMAC)
	_, err = unseal(k, b)
	require.ErrorIs(t, err, ErrBadMAC, "no MAC")
	_, err = unseal(k, s[:MACLen-1])
	require.ErrorIs(t, err, ErrMalformed)
	for i := range s {
		c := bytes.Clone(s)
		c[i] ^= 0x40
		_, err = unseal(k, c)
		require.ErrorIs(t, err, ErrBadMAC, "byte %d flipped", i)
	}
}

// FuzzUnseal: a datagram from the socket goes through unseal then Decode: any input gives an
// error or a message, never a panic, and only the job's MAC gets through.
func FuzzUnseal(f *testing.F) {
	k, _ := secret.FromBytes(bytes.Repeat([]byte{7}, secret.Size))
	b, _ := (&Msg{Type: REP, Seq: 2, Atomics: []Atomic{{3, 4}}}).Append(nil)
	f.Add(seal(k, b))
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		body, err := unseal(k, b)
		if err != nil {
			if !errors.Is(err, ErrBadMAC) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		var m Msg
		if err := m.Decode(body); err != nil {
			require.ErrorIs(t, err, ErrMalformed)
		}
	})
}

// TestForgedCMTraffic: datagrams sent to a CM's port by a process outside the job — garbage,
// truncated messages, a well-formed UD SEND to the CM's QPN and Q_Key carrying a valid message
// without a MAC, with another key's MAC, a version-1 message — reach no handler and are
// counted; the job's own messages still get through.
func TestForgedCMTraffic(t *testing.T) {
	k, _ := secret.New()
	var mu sync.Mutex
	var got []Msg
	h := func(m *Msg, _ string) {
		mu.Lock()
		got = append(got, Msg{Type: m.Type, Src: m.Src, Dst: m.Dst})
		mu.Unlock()
	}
	n := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	a, err := Open([]string{"127.0.0.1:0"}, h, nil, WithKey(k.Bytes()))
	require.NoError(t, err)
	defer a.Close()
	b, err := Open([]string{"127.0.0.1:0"}, func(*Msg, string) {}, nil, WithKey(k.Bytes()))
	require.NoError(t, err)
	defer b.Close()

	ua, err := net.ResolveUDPAddr("udp", a.Addrs()[0])
	require.NoError(t, err)
	uc, err := net.DialUDP("udp", nil, ua)
	require.NoError(t, err)
	defer uc.Close()
	ud := func(payload []byte) []byte { // a UD SEND to a's CM queue pair, as the udp provider sends it
		hd := wire.Header{Opcode: wire.OpUDSend, Flags: wire.FlagOnly, DestQPN: a.QPN(), PSN: 1,
			DETH: wire.DETH{QKey: QKey, SrcQPN: 99}}
		p, err := wire.Append(nil, &hd, payload)
		require.NoError(t, err)
		return p
	}
	req, err := (&Msg{Type: ConnREQ, Src: 66, Dst: 1, Seq: 1, Payload: []byte("forged")}).Append(nil)
	require.NoError(t, err)
	o, _ := secret.New()
	v1 := bytes.Clone(req)
	v1[0] = 1
	forged := map[string][]byte{
		"garbage":           []byte("\x07garbage datagram"),
		"truncated":         ud(seal(k, bytes.Clone(req))[:20]),
		"no MAC":            ud(req),
		"another key's MAC": ud(seal(o, bytes.Clone(req))),
		"version 1":         ud(seal(k, v1)[:len(v1)]),
		"short MAC":         ud(seal(k, bytes.Clone(req))[:len(req)+8]),
	}
	want := uint64(0)
	for name, d := range forged {
		before := a.Rejected()
		_, err := uc.Write(d)
		require.NoError(t, err)
		if name != "garbage" { // garbage never reaches the CM's queue pair: the udp engine drops it
			want++
			require.Eventually(t, func() bool { return a.Rejected() == before+1 }, 10*time.Second, time.Millisecond, name)
		}
	}
	// The job's messages still arrive; none of the forged ones did.
	require.NoError(t, b.Send(a.Addrs(), a.QPN(), &Msg{Type: ConnREQ, Src: 2, Dst: 1, Payload: []byte("real")}))
	require.Eventually(t, func() bool { return n() >= 1 }, 10*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	require.EqualValues(t, 2, got[0].Src)
	require.Equal(t, want, a.Rejected())

	_, err = Open([]string{"127.0.0.1:0"}, h, nil, WithKey([]byte{1}))
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
}
