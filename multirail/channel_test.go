package multirail_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/provider/tcp"
	"github.com/goarmci/goarmci/multirail"
	"github.com/goarmci/goarmci/multirail/sched"
)

// side is one process's view: a device with `rails` ports, its network, and a channel of one
// subchannel per rail to the other side.
type side struct {
	dev *ibv.Context
	net *multirail.Network
	ch  *multirail.Channel
	mr  *ibv.MR
	buf []byte
}

// pair connects two in-process tcp devices over `rails` loopback rails with the given policy.
func pair(t testing.TB, rails int, policy string, threshold, bufSize int) (a, b *side) {
	t.Helper()
	var s [2]*side
	var conns [2][]*hybridft.Conn
	for i := range s {
		var ports []tcp.PortConfig
		for r := 0; r < rails; r++ {
			ports = append(ports, tcp.PortConfig{Listen: "127.0.0.1:0"})
		}
		dev, err := tcp.Open(tcp.Config{Ports: ports, TimeoutFloor: 50 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { _ = dev.Close() })
		ep, err := hybridft.NewEndpoint(dev, 1, 4096)
		require.NoError(t, err)
		x := &side{dev: dev, net: multirail.NewNetwork(ep), buf: make([]byte, bufSize)}
		x.mr, err = ep.PD.RegMR(x.buf, ibv.AccessAll)
		require.NoError(t, err)
		for r := 0; r < rails; r++ {
			e := *ep
			e.Port = uint8(r + 1)
			c, err := e.NewConn()
			require.NoError(t, err)
			conns[i] = append(conns[i], c)
		}
		s[i] = x
	}
	for i := range s {
		for r, c := range conns[i] {
			require.NoError(t, c.Connect(conns[1-i][r].Local()))
		}
		ch, err := s[i].net.NewChannelConfig(multirail.ChannelConfig{Policy: policy, Threshold: threshold}, conns[i]...)
		require.NoError(t, err)
		s[i].ch = ch
	}
	return s[0], s[1]
}

func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*13 + i*7 + i>>9)
	}
}

// TestChannelStripes: every policy on two rails moves data both ways correctly, a read issued
// right after an overlapping non-blocking write returns the written data, a flush leaves no
// work request outstanding on any subchannel, and striping policies use both subchannels.
func TestChannelStripes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sizes := []int{1, 77, 4095, 4096, 4097, 1<<20 + 3}
	for _, pol := range sched.Names() {
		t.Run(pol, func(t *testing.T) {
			const total = 4 << 20
			a, b := pair(t, 2, pol, 4096, total)
			local := make([]byte, 2<<20)
			for i, size := range sizes {
				src := local[:size]
				fill(src, i+1)
				w := a.net.NewRequest(nil)
				require.NoError(t, a.ch.Write(ctx, w, src, b.mr.Addr+100, b.mr.RKey))
				a.net.Issued(w)
				got := make([]byte, size)
				r := a.net.NewRequest(nil)
				r.Blocking = true
				require.NoError(t, a.ch.Read(ctx, r, got, b.mr.Addr+100, b.mr.RKey))
				a.net.Issued(r)
				require.NoError(t, a.net.Wait(ctx, r))
				require.NoError(t, a.net.Wait(ctx, w))
				require.True(t, bytes.Equal(src, got), "%s size %d: read after write", pol, size)
				require.True(t, bytes.Equal(src, b.buf[100:100+size]), "%s size %d: target memory", pol, size)
			}
			// Many writes in flight, then a flush completes every subchannel.
			before := int64(0)
			for s := range a.ch.Subchannels() {
				before += a.ch.Posted(s)
			}
			for k := 0; k < 4; k++ {
				w := a.net.NewRequest(nil)
				require.NoError(t, a.ch.Write(ctx, w, local[:1<<20], b.mr.Addr+uint64(k<<20), b.mr.RKey))
				a.net.Issued(w)
			}
			require.NoError(t, a.ch.Flush(ctx))
			used, posted := 0, int64(-before)
			for s := range a.ch.Subchannels() {
				require.Zero(t, a.ch.Outstanding(s))
				if a.ch.Posted(s) > 0 {
					used++
				}
				posted += a.ch.Posted(s)
			}
			require.Zero(t, a.net.InFlight())
			switch pol {
			case "binding":
				require.Equal(t, 1, used)
				require.Equal(t, int64(4), posted, "binding: one work request per write")
			case "bss": // two paths: n_batch = 1, the single best path (it may move between writes)
				require.Equal(t, int64(4), posted, "bss n_batch=1: one work request per write")
			default:
				require.Equal(t, 2, used, "%s used %d subchannels", pol, used)
			}
			for k := 0; k < 4; k++ {
				require.True(t, bytes.Equal(local[:1<<20], b.buf[k<<20:(k+1)<<20]), "%s: flushed write %d", pol, k)
			}
		})
	}
}

// TestAdaptiveFeedbackRuns: adaptive striping through a real channel, with delivery times fed
// back after every operation, keeps striping every 1 MiB write over both rails (equal loopback
// rails keep both weights well above the floor).
func TestAdaptiveFeedbackRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := pair(t, 2, "adaptive", 4096, 1<<20)
	src := make([]byte, 1<<20)
	for k := 0; k < 20; k++ {
		r := a.net.NewRequest(nil)
		require.NoError(t, a.ch.Write(ctx, r, src, b.mr.Addr, b.mr.RKey))
		a.net.Issued(r)
		require.NoError(t, a.net.Wait(ctx, r))
	}
	require.Equal(t, int64(40), a.ch.Posted(0)+a.ch.Posted(1), "every write striped in two")
	require.Equal(t, "adaptive:0.5", a.ch.Policy())
}

// TestOrderingUnderStriping: write-after-write and read-after-write to overlapping ranges in
// flight together, striped over two subchannels, apply in issue order.
func TestOrderingUnderStriping(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pol := range []string{"even", "round-robin", "fragment", "bss:2"} {
		a, b := pair(t, 2, pol, 4096, 1<<20)
		var reqs []*multirail.Request
		want := make([]byte, 256<<10)
		for k := 0; k < 16; k++ {
			src := make([]byte, 64<<10+k*1000)
			fill(src, k+5)
			off := (k * 9000) % (128 << 10)
			copy(want[off:], src)
			r := a.net.NewRequest(nil)
			require.NoError(t, a.ch.Write(ctx, r, src, b.mr.Addr+uint64(off), b.mr.RKey))
			a.net.Issued(r)
			reqs = append(reqs, r)
		}
		got := make([]byte, len(want))
		r := a.net.NewRequest(nil)
		require.NoError(t, a.ch.Read(ctx, r, got, b.mr.Addr, b.mr.RKey))
		a.net.Issued(r)
		require.NoError(t, a.net.Wait(ctx, r))
		for _, q := range reqs {
			require.NoError(t, a.net.Wait(ctx, q))
		}
		require.True(t, bytes.Equal(want, got), "%s: overlapping writes applied out of order", pol)
	}
}

func TestChannelBadPolicy(t *testing.T) {
	_, err := (&multirail.Network{}).NewChannelConfig(multirail.ChannelConfig{Policy: "fastest"}, &hybridft.Conn{})
	require.ErrorIs(t, err, multirail.ErrPolicy)
	_, err = (&multirail.Network{}).NewChannel()
	require.ErrorIs(t, err, ibv.ErrInvalidArgument)
}

// TestSmallOperationsStayOnOneSubchannel: on four rails, blocking 8-byte writes and reads issued
// one at a time all use the subchannel of the first (no cold queue pair per operation: the
// small-message latency of n rails is one rail's), while a burst of non-blocking ones spreads
// over every subchannel (sched/mux.go).
func TestSmallOperationsStayOnOneSubchannel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pol := range []string{"auto", "even", "adaptive", "epc"} {
		t.Run(pol, func(t *testing.T) {
			const rails = 4
			a, b := pair(t, rails, pol, 0, 4096)
			local := make([]byte, 8)
			for k := 0; k < 20; k++ {
				fill(local, k)
				r := a.net.NewRequest(nil)
				r.Blocking = true
				if k%2 == 0 {
					require.NoError(t, a.ch.Write(ctx, r, local, b.mr.Addr+uint64(8*k), b.mr.RKey))
				} else {
					require.NoError(t, a.ch.Read(ctx, r, local, b.mr.Addr+uint64(8*k), b.mr.RKey))
				}
				a.net.Issued(r)
				require.NoError(t, a.net.Wait(ctx, r))
			}
			require.Equal(t, int64(20), a.ch.Posted(0), "serial small operations left subchannel 0")
			for s := 1; s < rails; s++ {
				require.Zero(t, a.ch.Posted(s), "subchannel %d", s)
			}
			// A burst of non-blocking writes in flight together: every subchannel takes some.
			reqs := make([]*multirail.Request, 0, 4*rails)
			for k := 0; k < 4*rails; k++ {
				r := a.net.NewRequest(nil)
				require.NoError(t, a.ch.Write(ctx, r, local, b.mr.Addr+uint64(8*k), b.mr.RKey))
				a.net.Issued(r)
				reqs = append(reqs, r)
			}
			for _, r := range reqs {
				require.NoError(t, a.net.Wait(ctx, r))
			}
			for s := 1; s < rails; s++ {
				require.Positive(t, a.ch.Posted(s), "subchannel %d unused by the burst", s)
			}
			require.Equal(t, int64(20+4*rails), a.ch.Posted(0)+a.ch.Posted(1)+a.ch.Posted(2)+a.ch.Posted(3))
		})
	}
}

// BenchmarkSmallWrite: one blocking 8-byte write (and read) at a time over 1, 2 and 4 loopback
// rails with the default policy: the small-message latency should not depend on the rails.
func BenchmarkSmallWrite(b *testing.B) {
	for _, rails := range []int{1, 2, 4} {
		for _, read := range []bool{false, true} {
			name := fmt.Sprintf("rails=%d/write", rails)
			if read {
				name = fmt.Sprintf("rails=%d/read", rails)
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				x, y := pair(b, rails, "auto", 0, 4096)
				local := make([]byte, 8)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					r := x.net.NewRequest(nil)
					r.Blocking = true
					var err error
					if read {
						err = x.ch.Read(ctx, r, local, y.mr.Addr, y.mr.RKey)
					} else {
						err = x.ch.Write(ctx, r, local, y.mr.Addr, y.mr.RKey)
					}
					if err != nil {
						b.Fatal(err)
					}
					x.net.Issued(r)
					if err := x.net.Wait(ctx, r); err != nil {
						b.Fatal(err)
					}
					x.net.Release(r)
				}
			})
		}
	}
}

// TestFailedWriteIsAnAccessError: a write with a bad rkey fails, and its error tells a bad key
// (ibv.ErrAccess, through ibv.WCError) from a dead path (ibv.ErrRetryExceeded).
func TestFailedWriteIsAnAccessError(t *testing.T) {
	a, b := pair(t, 1, "", 0, 4096)
	ctx := context.Background()
	req := a.net.NewRequest(nil)
	require.NoError(t, a.ch.Write(ctx, req, a.buf[:64], b.mr.Addr, b.mr.RKey+12345))
	a.net.Issued(req)
	err := a.net.Wait(ctx, req)
	require.ErrorIs(t, err, multirail.ErrFailed)
	require.ErrorIs(t, err, ibv.ErrAccess)
	require.NotErrorIs(t, err, ibv.ErrRetryExceeded)
	var wce *ibv.WCError
	require.ErrorAs(t, err, &wce)
	require.Equal(t, ibv.WCRemAccessErr, wce.Status)
}
