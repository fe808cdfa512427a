package udp_test

import (
	"fmt"
	"net"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/ibv/ibvtest"
	"github.com/goarmci/goarmci/ibv/provider/udp"
	"github.com/goarmci/goarmci/internal/testutil"
)

var mgid = ibv.GID{0xff, 0x15, 0x40, 0x1b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xab, 0xcd}

const mlid = 0xC0AB

// inNetns runs f on a thread of its own that has entered network namespace ns (sockets created
// there stay in ns); the thread ends with the goroutine (never unlocked, so never reused).
func inNetns(t *testing.T, ns string, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		f()
		done <- nil
	}()
	require.NoError(t, <-done, "entering namespace %s", ns)
}

type mcastRank struct {
	qp *ibv.QP
	mr *ibv.MR
	ah *ibv.AH
	pa ibv.PortAttr
}

// newMcastRank opens a udp device with one port at addr, creates a UD QP with receives posted
// and attaches it to the group.
func newMcastRank(t *testing.T, addr string) *mcastRank {
	dev, err := udp.Open(udp.Config{Ports: []udp.PortConfig{{Listen: addr}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = dev.Close() })
	r := &mcastRank{qp: ibvtest.ConnectUD(t, dev, 1, 0x77), pa: ibvtest.QueryPort(t, dev, 1)}
	r.mr, err = r.qp.PD().RegMR(make([]byte, 8*256), ibv.AccessLocalWrite)
	require.NoError(t, err)
	for i := 0; i < 8; i++ {
		require.NoError(t, r.qp.PostRecv(&ibv.RecvWR{ID: uint64(i), SGL: []ibv.SGE{r.mr.SGE(256*i, 256)}}))
	}
	require.NoError(t, r.qp.AttachMcast(mgid, mlid))
	r.ah, err = r.qp.PD().CreateAH(ibv.AHAttr{DLID: mlid, DGID: mgid, PortNum: 1})
	require.NoError(t, err)
	return r
}

// expect waits for one datagram at r and checks it came from src with msg.
func (r *mcastRank) expect(t *testing.T, src *mcastRank, msg string) {
	t.Helper()
	wc := ibvtest.WaitWC(t, r.qp.RecvCQ())
	require.Equal(t, ibv.WCSuccess, wc.Status, "%+v", wc)
	assert.Equal(t, msg, string(r.mr.Buf()[256*int(wc.WRID):256*int(wc.WRID)+int(wc.ByteLen)]))
	assert.Equal(t, src.qp.Num(), wc.SrcQP)
	assert.Equal(t, src.pa.Addr, wc.SrcAddr)
}

func (r *mcastRank) send(t *testing.T, msg string) {
	t.Helper()
	require.NoError(t, r.qp.PostSend(&ibv.SendWR{ID: 1, Opcode: ibv.OpSend, Flags: ibv.SendSignaled, LocalBuf: []byte(msg),
		AH: r.ah, RemoteQPN: ibv.MulticastQPN, QKey: 0x77}))
	ibvtest.WaitOK(t, r.qp.SendCQ(), 1)
}

// On the switched netns testbed (a Linux bridge joins three hosts), plus a second rank on host
// 0: one multicast send from host 0 reaches the attached QPs of every host — through the bridge,
// and on host 0 by IP multicast loopback, the sender's own QP included. Skips without root or
// namespaces.
func TestMulticastNetnsTestbed(t *testing.T) {
	tb := testutil.NewSwitchedTestbed(t, 3, 1)
	ranks := make([]*mcastRank, 4)
	for i, h := range []int{0, 0, 1, 2} {
		inNetns(t, tb.Hosts[h].NS, func() { ranks[i] = newMcastRank(t, tb.Hosts[h].Addrs[0]+":0") })
	}
	ranks[0].send(t, "release 1")
	for i, r := range ranks {
		t.Run(fmt.Sprint(i), func(t *testing.T) { r.expect(t, ranks[0], "release 1") })
	}
	ranks[3].send(t, "release 2")
	for _, r := range ranks {
		r.expect(t, ranks[3], "release 2")
	}
}

// On loopback, where the lo interface carries multicast (skipped otherwise: `ip link set lo
// multicast on` enables it).
func TestMulticastLoopback(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil || lo.Flags&net.FlagMulticast == 0 {
		t.Skip("loopback has no multicast (ip link set lo multicast on)")
	}
	a, b := newMcastRank(t, "127.0.0.1:0"), newMcastRank(t, "127.0.0.1:0")
	a.send(t, "hello group")
	a.expect(t, a, "hello group")
	b.expect(t, a, "hello group")
}

func TestMcastAddr(t *testing.T) {
	ga := udp.McastAddr(mgid)
	require.True(t, ga.Addr().IsMulticast())
	assert.Equal(t, byte(239), ga.Addr().As4()[0])
	assert.Equal(t, byte(255), ga.Addr().As4()[1])
	assert.GreaterOrEqual(t, ga.Port(), uint16(30000))
	assert.Equal(t, ga, udp.McastAddr(mgid))
}
