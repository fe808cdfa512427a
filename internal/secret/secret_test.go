package secret

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestKeyRoundTripAndRedaction(t *testing.T) {
	k, err := New()
	require.NoError(t, err)
	require.False(t, k.IsZero())
	p, err := Parse(k.Hex())
	require.NoError(t, err)
	require.True(t, p.Equal(k))
	b, err := FromBytes(k.Bytes())
	require.NoError(t, err)
	require.True(t, b.Equal(k))
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k), fmt.Sprintf("%+v", struct{ K Key }{k})} {
		require.NotContains(t, s, k.Hex()[:8], s)
	}
	_, err = Parse("00")
	require.ErrorIs(t, err, ErrBadSecret)
	_, err = Parse(k.Hex()[:63] + "x")
	require.ErrorIs(t, err, ErrBadSecret)
	_, err = FromBytes(make([]byte, 5))
	require.ErrorIs(t, err, ErrBadSecret)
	z, err := FromBytes(nil)
	require.NoError(t, err)
	require.True(t, z.IsZero())
}

func TestMAC(t *testing.T) {
	k, _ := New()
	o, _ := New()
	m := k.MAC("l", []byte("a"), []byte("bc"))
	require.Len(t, m, MACSize)
	require.True(t, k.Verify(m, "l", []byte("a"), []byte("bc")))
	require.True(t, k.Verify(m[:16], "l", []byte("a"), []byte("bc")))
	require.False(t, k.Verify(m[:15], "l", []byte("a"), []byte("bc")))
	require.False(t, k.Verify(m, "l", []byte("ab"), []byte("c")), "field boundaries are part of the input")
	require.False(t, k.Verify(m, "m", []byte("a"), []byte("bc")), "the label is part of the input")
	require.False(t, o.Verify(m, "l", []byte("a"), []byte("bc")), "another key")
	require.False(t, Key{}.Verify(m, "l", []byte("a"), []byte("bc")))
	m[3] ^= 1
	require.False(t, k.Verify(m, "l", []byte("a"), []byte("bc")))
	require.NotEqual(t, Nonce(), Nonce())
}

func TestRejectionsRateLimit(t *testing.T) {
	var r Rejections
	t0 := time.Unix(1000, 0)
	log, sup := r.Add(t0)
	require.True(t, log)
	require.Zero(t, sup)
	for i := 1; i <= 5; i++ {
		log, _ = r.Add(t0.Add(time.Duration(i) * time.Second))
		require.False(t, log)
	}
	log, sup = r.Add(t0.Add(LogEvery))
	require.True(t, log)
	require.EqualValues(t, 5, sup)
	require.EqualValues(t, 7, r.Count())
}
