package accum

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func TestRMWDispatch(t *testing.T) {
	w := make([]uint64, 1)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8)
	v, err := RMW(OpFetchAdd64, b, 5, 0)
	require.NoError(t, err)
	require.Zero(t, v)
	v, err = RMW(OpCmpSwap64, b, 9, 4) // no match: unchanged
	require.NoError(t, err)
	require.Equal(t, uint64(5), v)
	require.Equal(t, uint64(5), w[0])
	v, err = RMW(OpCmpSwap64, b, 9, 5)
	require.NoError(t, err)
	require.Equal(t, uint64(5), v)
	require.Equal(t, uint64(9), w[0])
	v, err = RMW(OpSwap32, b, 0xffffffff_00000001, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(9), v)
	require.Equal(t, uint64(1), w[0], "a 32-bit swap touches the low word only")
	_, err = RMW(Op(0), b, 1, 0)
	require.True(t, errors.Is(err, ErrType))
	_, err = RMW(OpFetchAdd64, b[1:], 1, 0)
	require.True(t, errors.Is(err, ErrShape))
}
