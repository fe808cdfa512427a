package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWindowBytes: the packet window shrinks with the segment size under WindowBytes, never below
// 2 packets, and ACK requests come at least every ackBytes.
func TestWindowBytes(t *testing.T) {
	e := &Engine{cfg: Config{WindowBytes: 4 << 20}, window: 128}
	require.Equal(t, int32(128), e.windowFor(4096))
	require.Equal(t, int32(16), e.windowFor(256<<10))
	require.Equal(t, int32(2), e.windowFor(4<<20))
	e.cfg.WindowBytes = 0
	require.Equal(t, int32(128), e.windowFor(256<<10))
	require.Equal(t, uint32(32), ackEvery(4096))
	require.Equal(t, uint32(16), ackEvery(64<<10))
	require.Equal(t, uint32(4), ackEvery(256<<10))
	require.Equal(t, uint32(1), ackEvery(1<<20))
}
