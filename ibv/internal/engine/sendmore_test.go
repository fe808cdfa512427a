package engine

import (
	"encoding/binary"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/ibv"
)

// corkingTransport is a memTransport that batches as the tcp provider does (Corker): packets
// sent while any Cork is open are held, and the last Uncork sends them, one burst.
type corkingTransport struct {
	*memTransport
	mu     sync.Mutex
	depth  int
	held   []heldPacket
	bursts []int // packets per burst sent at an Uncork
}

type heldPacket struct {
	path         ibv.AHAttr
	hdr, payload []byte
}

func (c *corkingTransport) Send(path ibv.AHAttr, hdr, payload []byte) error {
	c.mu.Lock()
	if c.depth > 0 {
		c.held = append(c.held, heldPacket{path, slices.Clone(hdr), slices.Clone(payload)})
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return c.memTransport.Send(path, hdr, payload)
}

func (c *corkingTransport) Cork(ibv.AHAttr) {
	c.mu.Lock()
	c.depth++
	c.mu.Unlock()
}

func (c *corkingTransport) Uncork(ibv.AHAttr) {
	c.mu.Lock()
	c.depth--
	if c.depth > 0 || len(c.held) == 0 {
		c.mu.Unlock()
		return
	}
	held := c.held
	c.held = nil
	c.bursts = append(c.bursts, len(held))
	c.mu.Unlock()
	for _, p := range held {
		_ = c.memTransport.Send(p.path, p.hdr, p.payload)
	}
}

func (c *corkingTransport) state() (held int, bursts []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held), slices.Clone(c.bursts)
}

// TestSendMoreOneBurst: a write posted with SendMore is held until the next post on the queue
// pair, and the two go in one burst (a put and its notification); a follow-up that PostSend
// refuses still releases the write, and so does moving the QP to ERROR.
func TestSendMoreOneBurst(t *testing.T) {
	n := newMemNet()
	var ct *corkingTransport
	n.wrap = func(m *memTransport) Transport {
		ct = &corkingTransport{memTransport: m}
		return ct
	}
	xc := n.open(t, 1, Config{})
	n.wrap = nil
	x, y := connectRC(t, xc, n.open(t, 1, Config{}), pairOpts{})
	tb := y.mr.Buf()
	data := []byte("the data before its flag")
	one := make([]byte, 8)
	binary.LittleEndian.PutUint64(one, 1)

	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled | ibv.SendMore,
		LocalBuf: data, RemoteAddr: y.mr.Addr, RKey: y.mr.RKey}))
	held, bursts := ct.state()
	require.Equal(t, 1, held, "the write waits for the post that follows it")
	require.Empty(t, bursts)
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 2, Opcode: ibv.OpAccumulate, Flags: ibv.SendSignaled, AccType: ibv.AccInt64, Scale: 1,
		LocalBuf: one, RemoteAddr: y.mr.Addr + 64, RKey: y.mr.RKey}))
	for id := uint64(1); id <= 2; id++ {
		wc := waitWC(t, x.cq)
		require.Equal(t, ibv.WCSuccess, wc.Status)
		require.Equal(t, id, wc.WRID)
	}
	require.Equal(t, data, tb[:len(data)])
	require.Equal(t, uint64(1), binary.LittleEndian.Uint64(tb[64:]))
	held, bursts = ct.state()
	require.Zero(t, held)
	require.Equal(t, []int{2}, bursts, "write and accumulate in one burst")

	// a refused follow-up (both LocalBuf and SGL) releases the held write
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 3, Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled | ibv.SendMore,
		LocalBuf: []byte("second"), RemoteAddr: y.mr.Addr + 128, RKey: y.mr.RKey}))
	err := x.qp.PostSend(&ibv.SendWR{ID: 4, Opcode: ibv.OpRDMAWrite, LocalBuf: one, SGL: []ibv.SGE{{Addr: x.mr.Addr, Length: 8, LKey: x.mr.LKey}}})
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
	wc := waitWC(t, x.cq)
	require.Equal(t, ibv.WCSuccess, wc.Status)
	require.Equal(t, uint64(3), wc.WRID)
	require.Equal(t, []byte("second"), tb[128:134])

	// moving the QP to ERROR releases a held write (it completes flushed or done, never stuck)
	require.NoError(t, x.qp.PostSend(&ibv.SendWR{ID: 5, Opcode: ibv.OpRDMAWrite, Flags: ibv.SendSignaled | ibv.SendMore,
		LocalBuf: []byte("third"), RemoteAddr: y.mr.Addr + 256, RKey: y.mr.RKey}))
	require.NoError(t, x.qp.Modify(&ibv.QPAttr{State: ibv.StateError}, ibv.AttrState))
	wc = waitWC(t, x.cq)
	require.Equal(t, uint64(5), wc.WRID)
	held, _ = ct.state()
	require.Zero(t, held)
}
