package tcp

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/wire"
)

// TestPacketSizes: with segments larger than the path MTU, writes and reads shorter than one
// segment travel as path-MTU packets (a read asks for them with FlagPathMTU) and longer ones as
// segments, and both arrive intact when packets of either kind are lost (the retried read asks
// for the same packet size as the first try).
func TestPacketSizes(t *testing.T) {
	const mtu, seg = 4096, DefaultSegmentSize
	var mu sync.Mutex
	largest := map[string]int{}        // opcode/size -> largest inbound payload
	rng := rand.New(rand.NewPCG(1, 2)) // not periodic: a retried message loses other packets
	drop := func(port uint8, pkt []byte) bool {
		var p wire.Packet
		if wire.Decode(pkt, &p) != nil {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if p.Opcode == wire.OpWrite || p.Opcode == wire.OpReadResp {
			if rng.IntN(50) == 0 {
				return true // lose one packet in 50: go-back-N, and reads retried from the missing PSN
			}
			k := p.Opcode.String()
			largest[k] = max(largest[k], len(p.Payload))
		}
		return false
	}
	cfg := Config{SegmentSize: seg, TimeoutFloor: 20 * time.Millisecond, DropInbound: drop}
	x, y := connect(t, open(t, 1, cfg), open(t, 1, cfg), 4<<20, false, 7)
	for _, size := range []int{mtu + 1, 100 << 10, seg - 1, seg, seg + 100<<10, 3<<20 + 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			mu.Lock()
			clear(largest)
			mu.Unlock()
			src := pattern(size, byte(size))
			wc := post(t, x, ibv.SendWR{Opcode: ibv.OpRDMAWrite, LocalBuf: src, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
			require.Equal(t, ibv.WCSuccess, wc.Status)
			require.True(t, bytes.Equal(src, y.mr.Buf()[:size]), "write")
			got := make([]byte, size)
			wc = post(t, x, ibv.SendWR{Opcode: ibv.OpRDMARead, LocalBuf: got, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey})
			require.Equal(t, ibv.WCSuccess, wc.Status)
			require.True(t, bytes.Equal(src, got), "read")
			want := mtu
			if size >= seg {
				want = seg
			}
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, want, largest[wire.OpWrite.String()], "largest write packet")
			require.Equal(t, want, largest[wire.OpReadResp.String()], "largest read response")
		})
	}
}

// TestReleaseAtLeast: the kernel release gate of the receive low-water mark.
func TestReleaseAtLeast(t *testing.T) {
	for _, c := range []struct {
		rel  string
		want bool
	}{{"6.18.44-fc-v657", true}, {"5.8.0", true}, {"5.7.19", false}, {"4.19.0-amd64", false}, {"10.0", true}, {"", false}, {"x.y", false}} {
		require.Equal(t, c.want, releaseAtLeast(c.rel, 5, 8), c.rel)
	}
}
