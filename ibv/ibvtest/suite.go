package ibvtest

import (
	"testing"

	"github.com/goarmci/goarmci/ibv"
)

// Run runs the conformance suite against p. Each case is a subtest with fresh devices; cases a
// provider declares unsupported in Caps are skipped with the reason.
func Run(t *testing.T, p Provider) {
	s := &suite{p: p, caps: p.Caps(), port: port(p)}
	t.Run("Device", s.testDevice)
	t.Run("QPStateMachine", s.testStateMachine)
	t.Run("PostBeforeRTS", s.testPostBeforeRTS)
	t.Run("FlushOnError", s.testFlushOnError)
	t.Run("ReconnectAfterReset", s.testReconnectAfterReset)
	t.Run("APMRequests", s.testAPM)
	t.Run("SQD", s.testSQD)
	t.Run("RDMA", s.testRDMA)
	t.Run("Unsignaled", s.testUnsignaled)
	t.Run("Ordering", s.testOrdering)
	t.Run("ManyQPs", s.testManyQPs)
	t.Run("Atomics", s.testAtomics)
	t.Run("AtomicAlignment", s.testAtomicAlignment)
	t.Run("Accumulate", s.testAccumulate)
	t.Run("ConcurrentAccumulate", s.testConcurrentAccumulate)
	t.Run("RemoteViolations", s.testRemoteViolations)
	t.Run("LocalViolations", s.testLocalViolations)
	t.Run("DeregisteredMR", s.testDeregisteredMR)
	t.Run("AsyncQPFatal", s.testAsyncQPFatal)
	t.Run("SendRecv", s.testSendRecv)
	t.Run("UD", s.testUD)
	t.Run("DC", s.testDC)
	t.Run("Close", s.testClose)
}

type suite struct {
	p    Provider
	caps Caps
	port uint8
}

func (s *suite) needRC(t *testing.T) {
	t.Helper()
	if !s.caps.RC {
		t.Skip("provider declares no RC support (Caps.RC false)")
	}
}

// two opens two fresh devices.
func (s *suite) two(t *testing.T) (a, b *ibv.Context) {
	t.Helper()
	return s.p.Open(t), s.p.Open(t)
}

// connect opens two devices and connects an RC pair between them.
func (s *suite) connect(t *testing.T) (qa, qb *ibv.QP) {
	t.Helper()
	s.needRC(t)
	a, b := s.two(t)
	return ConnectRCWith(t, a, b, RCOptions{Port: s.port})
}

func (s *suite) maxMsg(c *ibv.Context) uint64 {
	if s.caps.MaxMsgSize != 0 {
		return s.caps.MaxMsgSize
	}
	return c.QueryDevice().MaxMsgSize
}

func (s *suite) udMTU(t *testing.T, c *ibv.Context) int {
	if s.caps.UDMTU != 0 {
		return s.caps.UDMTU
	}
	return QueryPort(t, c, s.port).MTU
}

// checkQueuesEmpty fails if either CQ of qp holds a completion.
func checkQueuesEmpty(t *testing.T, qp *ibv.QP, why string) {
	t.Helper()
	if n := qp.SendCQ().Len(); n != 0 {
		t.Errorf("%s: send CQ holds %d unexpected completions", why, n)
	}
	if n := qp.RecvCQ().Len(); n != 0 {
		t.Errorf("%s: receive CQ holds %d unexpected completions", why, n)
	}
}

func le64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func put64(b []byte, v uint64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

func put32(b []byte, v uint32) {
	for i := 0; i < 4; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

// alignedOff returns the smallest offset ≥ min at which mr's virtual address is a multiple of al.
func alignedOff(mr *ibv.MR, min, al int) int {
	off := min
	for (mr.Addr+uint64(off))%uint64(al) != 0 {
		off++
	}
	return off
}
